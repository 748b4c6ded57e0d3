/**
 * File names from any source are refused when they could escape the model folder, and when they
 * hold a control character or a bidi override (a Hub's listing, a pushed folder alike).
 */
import { ShardctlError, firstUnsafeChar, quoteText } from "../errors/index.js";

/** The longest name (one path segment) common file systems take, bytes (ext4, APFS, XFS). */
const maxNameBytes = 255;
/**
 * The longest file name taken, bytes, folders included: what macOS takes for a whole path is 1024,
 * and a model's files are named in tens of bytes. Bounds the work any listing's names can cause.
 */
const maxPathBytes = 1024;
/** The most folders a file name may lie under: model repositories use one or two. */
const maxDepth = 32;

export function assertSafePath(path: string, from: string): void {
  const problem = unsafePathProblem(path);
  if (problem !== undefined) {
    throw new ShardctlError("UnsafeFileName", `${from} lists the file name ${showName(path)}, which ${problem}; refusing to stage it`, { terminal: true });
  }
}

/** What makes `path` unsafe to stage (the words after "which"), the first found in this order, or undefined. */
function unsafePathProblem(path: string): string | undefined {
  if (path === "") return "is empty";
  if (path.includes("\0")) return "contains a NUL byte";
  if (path.startsWith("/") || /^[A-Za-z]:/.test(path)) return "is absolute";
  if (path.includes("\\")) return "contains a backslash";
  if (Buffer.byteLength(path) > maxPathBytes) return `is over ${maxPathBytes} bytes long`;
  const segments = path.split("/");
  if (segments.length > maxDepth + 1) return `lies more than ${maxDepth} folders deep`;
  if (segments.some((s) => s === ".." || s === "." || s === "")) return "has a '..', '.' or empty segment";
  if (segments.some((s) => Buffer.byteLength(s) > maxNameBytes)) return `has a segment over ${maxNameBytes} bytes, longer than file systems take a name`;
  return undefined;
}

/**
 * File names are refused when they hold a control character (C0, DEL, C1) or a bidi control: no
 * model file has one, a newline in a name splits the lines of logs and listings that show it (and
 * the file list a pushed folder's commit digests), and an override makes a name read as another.
 */
export function assertPrintableName(path: string, from: string): void {
  const unsafe = firstUnsafeChar(path);
  if (unsafe === undefined) return;
  throw new ShardctlError("UnsafeFileName", `${from} lists the file name ${showName(path)}, which contains a control character (${unsafe}); refusing to stage it`, {
    terminal: true,
  });
}

/** The name as a JSON string with every control and bidi character escaped (JSON leaves DEL, C1 and bidi raw). */
export function showName(path: string): string {
  return quoteText(path);
}
