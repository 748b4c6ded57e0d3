/** File names from any source are refused when they could escape the model folder; a Hub's also when they hold a control character. */
import { ShardctlError } from "../errors/index.js";

export function assertSafePath(path: string, from: string): void {
  const problem =
    path === ""
      ? "is empty"
      : path.includes("\0")
        ? "contains a NUL byte"
        : path.startsWith("/") || /^[A-Za-z]:/.test(path)
          ? "is absolute"
          : path.includes("\\")
            ? "contains a backslash"
            : path.split("/").some((s) => s === ".." || s === "." || s === "")
              ? "has a '..', '.' or empty segment"
              : undefined;
  if (problem !== undefined) {
    throw new ShardctlError("UnsafeFileName", `${from} lists the file name ${showName(path)}, which ${problem}; refusing to stage it`, { terminal: true });
  }
}

/**
 * Hub file names are refused when they hold a control character (C0, DEL, C1): no model file has
 * one, and a newline in a name splits the lines of logs and listings that show it.
 */
export function assertPrintableName(path: string, from: string): void {
  const control = /\p{Cc}/u.exec(path)?.[0];
  if (control === undefined) return;
  throw new ShardctlError(
    "UnsafeFileName",
    `${from} lists the file name ${showName(path)}, which contains a control character (${codePoint(control)}); refusing to stage it`,
    { terminal: true },
  );
}

/** The name as a JSON string with every control character escaped (JSON leaves DEL and C1 raw). */
function showName(path: string): string {
  return JSON.stringify(path).replace(/[\u007f-\u009f]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
}

function codePoint(c: string): string {
  return `U+${c.charCodeAt(0).toString(16).toUpperCase().padStart(4, "0")}`;
}
