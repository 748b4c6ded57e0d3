/** File names from any source are refused when they could escape the model folder. */
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
    throw new ShardctlError("UnsafeFileName", `${from} lists the file name ${JSON.stringify(path)}, which ${problem}; refusing to stage it`, { terminal: true });
  }
}
