/**
 * The files of a Hub tree listing, checked whole before anything is downloaded: each entry an
 * object, each file's path a string that is safe (safe-path.ts) and printable, listed once, with a
 * whole size and the hash its kind has (an LFS file's sha256, another's git sha1). Directory entries
 * are skipped.
 */
import { quoteText, ShardctlError, showText } from "../errors/index.js";
import { assertPrintableName, assertSafePath } from "./safe-path.js";
import type { ManifestFile } from "./types.js";

/**
 * Largest file listed without LFS that is accepted, bytes (64 MiB). The Hub keeps every file over
 * 10 MB in LFS; a file without LFS is checked by its git blob hash, computed from the whole file read
 * into memory, so a weights file listed that way (a mirror that drops LFS data) is refused here
 * rather than read whole.
 */
export const maxGitHashedBytes = 64 * 1024 * 1024;

/** `base` is the Hub endpoint; `repo` and `commit` name the listing in messages. */
export function readHubTree(entries: unknown[], base: string, repo: string, commit: string): ManifestFile[] {
  const where = `the Hub tree of ${repo}@${commit}`;
  const files: ManifestFile[] = [];
  // Path → index of the entry that listed it first.
  const seen = new Map<string, number>();
  for (const [i, raw] of entries.entries()) {
    if (typeof raw !== "object" || raw === null || Array.isArray(raw)) throw listingInvalid(`${base}: entry ${i} of ${where} is ${kindOf(raw)}, not an object`);
    const entry = raw as Record<string, unknown>;
    if (entry.type !== "file") continue;
    const path = entry.path;
    if (typeof path !== "string") {
      const what = path === undefined ? "has no path" : `has a path that is ${kindOf(path)}, not a string`;
      throw listingInvalid(`${base}: entry ${i} of ${where} ${what}: ${excerpt(entry)}`);
    }
    assertSafePath(path, where);
    assertPrintableName(path, where);
    const first = seen.get(path);
    if (first !== undefined) throw listingInvalid(`${base}: ${where} lists ${quoteText(path)} twice (entries ${first} and ${i})`);
    seen.set(path, i);
    // An LFS file is named by its content's sha256 (64 hex digits), any other by its git blob sha1
    // (40); `"lfs": null`, as servers that write out empty fields send it, is no LFS.
    const lfs = entry.lfs === null || entry.lfs === undefined ? undefined : (entry.lfs as { oid?: unknown; size?: unknown });
    const size = lfs?.size ?? entry.size;
    const hash = lfs?.oid ?? entry.oid;
    const hashAlgo = lfs === undefined ? "git-sha1" : "sha256";
    if (typeof size !== "number" || !Number.isInteger(size) || size < 0) {
      throw listingInvalid(`${base}: ${where} gives ${quoteText(path)} a size that is not a whole number of bytes: ${excerpt(entry)}`);
    }
    if (!Number.isSafeInteger(size)) {
      throw listingInvalid(`${base}: ${where} gives ${quoteText(path)} a size past 2^53 bytes (8 PiB), far beyond any model file: ${excerpt(entry)}`);
    }
    if (typeof hash !== "string" || !(hashAlgo === "sha256" ? /^[0-9a-f]{64}$/ : /^[0-9a-f]{40}$/).test(hash)) {
      const want = hashAlgo === "sha256" ? "an LFS oid of 64 hex digits (sha256)" : "an oid of 40 hex digits (git sha1)";
      throw listingInvalid(`${base}: ${where} gives ${quoteText(path)} a hash that is not ${want}: ${excerpt(entry)}`);
    }
    if (hashAlgo === "git-sha1" && size > maxGitHashedBytes) {
      throw listingInvalid(
        `${base}: ${where} lists ${quoteText(path)} (${size} bytes) without LFS: the Hub keeps every file over 10 MB in LFS, named by its sha256, and a file this large is not checked by reading it whole into memory for its git hash`,
      );
    }
    files.push({ path, size, hash, hashAlgo });
  }
  // A name that is both a file and a folder of others ("a.json" and "a.json/b.json") cannot be laid
  // out on any disk: every staging of it would fail at the folder.
  // Found in one walk of a tree of the names' segments (time linear in the listing's bytes: a
  // listing of deep paths, compared prefix by prefix, once held the daemon for minutes).
  const root: NameNode = { file: undefined, children: new Map() };
  for (const { path } of files) {
    let node = root;
    const segments = path.split("/");
    for (const [i, segment] of segments.entries()) {
      let next = node.children.get(segment);
      if (next === undefined) node.children.set(segment, (next = { file: undefined, children: new Map() }));
      node = next;
      if (i < segments.length - 1 && node.file !== undefined) {
        throw listingInvalid(`${base}: ${where} lists ${quoteText(node.file)} as a file and as the folder of ${quoteText(path)}`);
      }
    }
    if (node.children.size > 0) throw listingInvalid(`${base}: ${where} lists ${quoteText(path)} as a file and as the folder of ${quoteText(aFileUnder(node))}`);
    node.file = path;
  }
  return files;
}

/** A segment of the listed names: the file that ends there, if one does, and the segments below it. */
interface NameNode {
  file: string | undefined;
  children: Map<string, NameNode>;
}

/** A file listed under `node` (one exists: a segment is added only on the way to a file). */
function aFileUnder(node: NameNode): string {
  for (;;) {
    if (node.file !== undefined) return node.file;
    const [next] = node.children.values();
    if (next === undefined) return "";
    node = next;
  }
}

function listingInvalid(what: string): ShardctlError {
  return new ShardctlError(
    "HubListingInvalid",
    `${what}; a commit's listing names each file once, by its path as a string, with its size and hash, so nothing is staged from it: check the endpoint (a mirror or proxy that rewrites listings)`,
    { terminal: true },
  );
}

function kindOf(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "a list";
  if (typeof value === "object") return "an object";
  return `a ${typeof value}`;
}

/** The entry as JSON, cut to 200 characters, its control and bidi characters escaped (it is the server's text). */
function excerpt(entry: Record<string, unknown>): string {
  const text = showText(JSON.stringify(entry));
  return text.length <= 200 ? text : `${text.slice(0, 200)}…`;
}
