import type { NodeAccess } from "./types.js";
import { within } from "./within.js";

/**
 * The last `lines` lines of a file on `node` (empty lines left out), none when the node cannot read
 * it or does not give it within `ms`: evidence worth a bounded wait, never a failure — a silent
 * (partitioned) node is not waited for until its connection drops.
 */
export async function readTail(node: NodeAccess, path: string, lines: number, ms: number): Promise<string[]> {
  const text = await within(
    ms,
    node.readFile(path).then((b) => b.toString("utf8")),
    "",
  );
  return text
    .split("\n")
    .filter((line) => line.length > 0)
    .slice(-lines);
}
