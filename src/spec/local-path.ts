/** Paths written in settings and definitions, as the control machine sees them. */
import { homedir } from "node:os";
import { isAbsolute, resolve } from "node:path";

/** `~/x` → the home directory; relative → against `dir` (the settings file's directory); absolute as is. */
export function resolveLocalPath(dir: string, path: string): string {
  if (path === "~" || path.startsWith("~/")) return resolve(homedir(), path.slice(2));
  return isAbsolute(path) ? path : resolve(dir, path);
}

/** True for paths that mean the same thing on any machine: absolute or `~/`. */
export function isPortablePath(path: string): boolean {
  return isAbsolute(path) || path === "~" || path.startsWith("~/");
}
