/**
 * Reading a status file back (commands, the dashboard, a restarted daemon's memory). The file is
 * the daemon's, but the directory is a git checkout anyone can write to: a bad merge, an edit by
 * hand or a FIFO in its place is said as such, never taken for a missing file or read for ever.
 */
import { FileRefusedError, readRegularText } from "../../files/index.js";
import { ShardctlError } from "../../errors/index.js";
import { type ClusterStatus, statusSchema } from "./schema.js";

/** Largest status file read, bytes (16 MiB). A status holds a few KB: five passes, log tails of a few lines. */
const maxStatusBytes = 16 * 1024 * 1024;

/**
 * Read and validate a status file; undefined when absent. Throws ShardctlError `StatusFileUnreadable`
 * when it exists but cannot be read, is not a regular file, or is not a status (JSON or schema).
 */
export async function readStatus(file: string): Promise<ClusterStatus | undefined> {
  let text: string;
  try {
    text = await readRegularText(file, { maxBytes: maxStatusBytes, what: "status file" });
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    // A name too long for the file system: no such file can be there (the daemon could not write it either).
    if (code === "ENOENT" || code === "ENAMETOOLONG") return undefined;
    // Another user's file this user may not open: nothing wrong with it, and not to be deleted.
    if (code === "EACCES" || code === "EPERM") {
      throw new ShardctlError(
        "StatusFileUnreadable",
        `${file} cannot be read by this user (${String(error)}): it is the daemon's, written for its user; run this as that user, or give the file's group or others read access`,
        { cause: error },
      );
    }
    throw unreadable(file, error instanceof FileRefusedError ? error.detail : String(error), error);
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    // The parser's message quotes the text, which may be anything (a link to a token): only where it broke is said.
    throw unreadable(file, `not JSON (${whereJsonBroke(error, text)}); the daemon writes this file whole, so it was written by something else`, error);
  }
  const parsed = statusSchema.safeParse(value);
  if (!parsed.success) {
    const [first, ...rest] = parsed.error.issues;
    const more = rest.length === 0 ? "" : ` (and ${rest.length} more)`;
    throw unreadable(file, `not a status: ${first?.path.join(".") || "the top level"}: ${first?.message}${more}`, parsed.error);
  }
  return parsed.data;
}

/** "at line 3, column 7" from a JSON.parse error's position, or "at its end" / "somewhere" when it gives none. */
function whereJsonBroke(error: unknown, text: string): string {
  const at = /position (\d+)/.exec((error as Error).message);
  if (at === null) return /end of JSON input/.test((error as Error).message) ? "it ends too early" : "it does not parse";
  const before = text.slice(0, Number(at[1])).split("\n");
  return `it breaks at line ${before.length}, column ${before.at(-1)!.length + 1}`;
}

function unreadable(file: string, detail: string, cause: unknown): ShardctlError {
  return new ShardctlError(
    "StatusFileUnreadable",
    `${file} exists but cannot be read: ${detail}. A running daemon puts its own back within moments, or at its next pass of the cluster (\`shardctl reconcile <name>\` asks for one now); with no daemon, delete it`,
    { cause },
  );
}
