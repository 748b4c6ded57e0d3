import { readdir, stat } from "node:fs/promises";
import { join, relative } from "node:path";
import { isShardctlError, jsonErrorOf, ShardctlError } from "../errors/index.js";
import { FileRefusedError, openRegularFile, readInTurn, readRegularText, sourceReadDeadlineMs } from "../files/index.js";
import { readHeaderLength } from "./safetensors-header.js";
import type { RawHeader, SourceReader } from "./model-source.js";

/**
 * Reads a model from a local directory: config and index files whole, safetensors headers only;
 * one read at a time, each within `readDeadlineMs` (default sourceReadDeadlineMs, 30 s): see
 * src/files/source-reads.ts.
 */
export function createDirReader(root: string, { readDeadlineMs = sourceReadDeadlineMs }: { readDeadlineMs?: number } = {}): SourceReader {
  const inTurn = <T>(file: string, read: () => Promise<T>): Promise<T> => readInTurn(root, file, read, readDeadlineMs);
  return {
    describe: () => root,
    readJson: async (path, maxBytes) => {
      const file = join(root, path);
      let text: string;
      try {
        text = await inTurn(path, () => readRegularText(file, { maxBytes, what: path }));
      } catch (error) {
        if (isMissing(error)) {
          await inTurn(".", () => assertRootExists(root));
          return undefined;
        }
        // A FIFO or an oversized file stays what it is: terminal, with its own reason; so is a hang.
        if (error instanceof FileRefusedError || isShardctlError(error, "ModelSourceUnreachable")) throw error;
        throw unreadable(file, error);
      }
      try {
        return JSON.parse(text) as unknown;
      } catch (error) {
        throw new ShardctlError("ModelFileInvalid", `${file}: not valid JSON (${jsonErrorOf(error)})`, { terminal: true });
      }
    },
    readHeader: async (path, reserve) => inTurn(path, () => readLocalHeader(join(root, path), reserve)),
    listsCheaply: true,
    listFiles: async () => {
      try {
        const entries = await inTurn(".", () => readdir(root, { recursive: true, withFileTypes: true }));
        // Every entry but a folder: a Hugging Face cache snapshot holds its files as links into its
        // blobs, and whether a file is fit to stage (not a FIFO) is staging's to say.
        return entries.filter((e) => !e.isDirectory()).map((e) => relative(root, join(e.parentPath, e.name)));
      } catch (error) {
        if (isShardctlError(error, "ModelSourceUnreachable")) throw error;
        return undefined;
      }
    },
  };
}

/**
 * The 8-byte length and the JSON header of a local safetensors file, never its data. The file is
 * checked to be regular on the opened descriptor (a FIFO named model.safetensors would block the
 * read for ever); its size is not capped, since only the header is read and the format caps that
 * at 100 MB.
 */
async function readLocalHeader(file: string, reserve?: (headerBytes: number) => void): Promise<RawHeader | undefined> {
  let opened;
  try {
    opened = await openRegularFile(file, { what: "safetensors file" });
  } catch (error) {
    if (isMissing(error)) return undefined;
    if (error instanceof FileRefusedError) throw error;
    throw unreadable(file, error);
  }
  const { handle, size } = opened;
  try {
    const prefix = Buffer.alloc(Math.min(8, size));
    await handle.read(prefix, 0, prefix.length, 0);
    const length = readHeaderLength(prefix, file, size);
    reserve?.(length);
    const bytes = Buffer.alloc(length);
    const { bytesRead } = await handle.read(bytes, 0, length, 8);
    if (bytesRead !== length) throw unreadable(file, new Error(`short read: ${bytesRead} of ${length} header bytes`));
    return { bytes, fileSize: size };
  } finally {
    await handle.close();
  }
}

async function assertRootExists(root: string): Promise<void> {
  const st = await stat(root).catch(() => undefined);
  // Where it comes from ([model] id, resolved against the definition) is for the caller to add.
  if (st === undefined) {
    throw new ShardctlError(
      "ModelSourceUnreachable",
      `model directory ${root} does not exist: [model] id must name a directory holding config.json and the *.safetensors files`,
      { terminal: false },
    );
  }
  if (!st.isDirectory()) {
    throw new ShardctlError(
      "ModelSourceUnreachable",
      `${root} is a file, not a model directory: [model] id must name the directory that holds config.json and the *.safetensors files`,
      { terminal: false },
    );
  }
}

function isMissing(error: unknown): boolean {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  return code === "ENOENT" || code === "ENOTDIR";
}

function unreadable(file: string, error: unknown): ShardctlError {
  return new ShardctlError("ModelSourceUnreachable", `${file}: cannot be read (${(error as Error).message})`, { terminal: false, cause: error });
}
