/**
 * Free space on a node where a folder is (or would be: its nearest existing parent), in KiB, as
 * `df -Pk` reports it to the node's user; undefined when it cannot be told. A write that failed
 * says whether the disk was full, which SFTP's bare "Failure" does not.
 */
import { freeKiBFunction } from "./shell-scripts.js";
import type { NodeAccess } from "./types.js";

const script = `${freeKiBFunction}
free_kib "$1"`;

export async function freeKiB(node: NodeAccess, dir: string): Promise<number | undefined> {
  const result = await node.run(["sh", "-c", script, "sh", dir]).catch(() => undefined);
  const kib = Number(result?.stdout.trim());
  return result?.exitCode === 0 && result.stdout.trim() !== "" && Number.isFinite(kib) ? kib : undefined;
}
