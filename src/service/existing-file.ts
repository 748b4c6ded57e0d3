import { readFile } from "node:fs/promises";
import { ShardctlError } from "../errors/index.js";
import { isShardctlServiceFile, serviceMarker } from "./marker.js";

/** What is at a service's path: nothing, a file shardctl wrote, or someone else's. */
export type ExistingFile = "absent" | "ours" | "foreign";

export async function existingFile(path: string): Promise<ExistingFile> {
  const text = await readFile(path, "utf8").catch((error: NodeJS.ErrnoException) => {
    if (error.code === "ENOENT") return undefined;
    throw error;
  });
  if (text === undefined) return "absent";
  return isShardctlServiceFile(text) ? "ours" : "foreign";
}

/** Throws unless the file at `path` may be replaced or removed: absent, ours, or `force`. */
export async function refuseForeignFile(path: string, force: boolean, verb: "replace" | "remove"): Promise<ExistingFile> {
  const found = await existingFile(path);
  if (found === "foreign" && !force) {
    throw new ShardctlError(
      "ServiceFileForeign",
      `${path} was not written by shardctl (it has no "${serviceMarker}" line), so it is left as it is; move it away, or pass --force to ${verb} it`,
      { terminal: true },
    );
  }
  return found;
}
