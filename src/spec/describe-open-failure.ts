/** Why a definition file could not be opened, said for its issue at 1:1. */
import { readlink } from "node:fs/promises";
import { showText } from "../errors/index.js";

/** A broken symbolic link says where it points; a missing file says so; anything else gives Node's error. */
export async function describeOpenFailure(file: string, error: unknown): Promise<string> {
  const code = (error as NodeJS.ErrnoException).code;
  if (code === "ENOENT" || code === "ELOOP" || code === "ENOTDIR") {
    const target = await readlink(file).catch(() => undefined);
    if (target !== undefined) {
      const why = code === "ELOOP" ? "which loops back on itself" : "which does not exist";
      return `symbolic link to ${showText(target)}, ${why}; point the link at the definition or remove it`;
    }
  }
  if (code === "ENOENT") return "file not found";
  return `cannot read: ${String(error)}`;
}
