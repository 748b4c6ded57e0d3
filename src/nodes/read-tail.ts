import type { NodeAccess } from "./types.js";
import { within } from "./within.js";

/**
 * Bytes read from the end of a file for its last lines. Only the end is evidence, and an engine's
 * log has no bound: one of 600 MiB read whole could not be made a string, and the tail was lost.
 */
const tailWindowBytes = 64 * 1024;

/**
 * Characters kept of one line, the rest said as a count: a progress bar redrawn with carriage
 * returns can run to megabytes without a newline, and tails are kept in status files.
 */
export const maxTailLineChars = 400;

/**
 * The last `lines` lines of a file on `node` (empty lines left out), as a terminal shows them: a
 * line redrawn with carriage returns is its last drawing; a long one is cut at `maxTailLineChars`;
 * the first, when the file is longer than what is read of it, begins with "…".
 * None when the node cannot read it or does not give it within `ms`: evidence worth a bounded wait,
 * never a failure — a silent (partitioned) node is not waited for until its connection drops.
 */
export async function readTail(node: NodeAccess, path: string, lines: number, ms: number): Promise<string[]> {
  const result = await within(ms, node.run(["tail", "-c", String(tailWindowBytes), "--", path], { deadlineMs: ms }), undefined);
  if (result === undefined || result.exitCode !== 0) return [];
  const split = result.stdout.split("\n");
  // A full window (a file at least as long, give or take a cut character's replacement) starts
  // inside a line: its first line is the end of one, marked so.
  if (Buffer.byteLength(result.stdout) >= tailWindowBytes - 3) split[0] = `…${split[0]}`;
  return split
    .map(shownLine)
    .filter((line) => line.length > 0)
    .slice(-lines);
}

/** What a terminal shows of one line: after its last carriage return (a trailing one ends a CRLF line), cut to `maxTailLineChars`. */
function shownLine(raw: string): string {
  const line = raw.endsWith("\r") ? raw.slice(0, -1) : raw;
  const drawn = line.slice(line.lastIndexOf("\r") + 1);
  return drawn.length <= maxTailLineChars ? drawn : `${drawn.slice(0, maxTailLineChars)}… (${drawn.length - maxTailLineChars} more characters)`;
}
