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

export interface TailOptions {
  /**
   * Lines that are no evidence (a server's access-log line for each of shardctl's own health
   * probes, one a second): left out, and said as one first line, `(… N lines <leaveOut.what> left
   * out)`, when any were among the last `lines`. Default none.
   */
  leaveOut?: { pattern: RegExp; what: string };
}

/**
 * The last `lines` lines of a file on `node` (empty lines left out), as a terminal shows them: a
 * line redrawn with carriage returns is its last drawing; a long one is cut at `maxTailLineChars`;
 * the first, when the file is longer than what is read of it, begins with "…".
 * None when the node cannot read it or does not give it within `ms`: evidence worth a bounded wait,
 * never a failure — a silent (partitioned) node is not waited for until its connection drops.
 */
export async function readTail(node: NodeAccess, path: string, lines: number, ms: number, options: TailOptions = {}): Promise<string[]> {
  const result = await within(ms, node.run(["tail", "-c", String(tailWindowBytes), "--", path], { deadlineMs: ms }), undefined);
  if (result === undefined || result.exitCode !== 0) return [];
  const split = result.stdout.split("\n");
  // A full window (a file at least as long, give or take a cut character's replacement) starts
  // inside a line: its first line is the end of one, marked so.
  if (Buffer.byteLength(result.stdout) >= tailWindowBytes - 3) split[0] = `…${split[0]}`;
  const shown = split.map(shownLine).filter((line) => line.length > 0);
  const leaveOut = options.leaveOut;
  return leaveOut === undefined ? shown.slice(-lines) : lastEvidence(shown, lines, leaveOut);
}

/**
 * The last `lines` of `shown` that `leaveOut` does not match. When it matched any line among them
 * (after the first), the first of the `lines` says how many (a tail of one line keeps that line).
 */
function lastEvidence(shown: string[], lines: number, leaveOut: NonNullable<TailOptions["leaveOut"]>): string[] {
  if (lines <= 0) return [];
  const evidence = shown.flatMap((line, i) => (leaveOut.pattern.test(line) ? [] : [i]));
  const whole = evidence.slice(Math.max(0, evidence.length - lines));
  // Left out within the span those lines cover: after the first of them, or anywhere when fewer
  // than `lines` are evidence.
  const from = whole.length < lines ? -1 : whole[0]!;
  const left = shown.length - (from + 1) - whole.filter((i) => i > from).length;
  if (left === 0 || lines === 1) return whole.map((i) => shown[i]!);
  const kept = whole.slice(whole.length < lines ? 0 : 1);
  return [`(… ${left} line${left === 1 ? "" : "s"} ${leaveOut.what} left out)`, ...kept.map((i) => shown[i]!)];
}

/** What a terminal shows of one line: after its last carriage return (a trailing one ends a CRLF line), cut to `maxTailLineChars`. */
function shownLine(raw: string): string {
  const line = raw.endsWith("\r") ? raw.slice(0, -1) : raw;
  const drawn = line.slice(line.lastIndexOf("\r") + 1);
  return drawn.length <= maxTailLineChars ? drawn : `${drawn.slice(0, maxTailLineChars)}… (${drawn.length - maxTailLineChars} more characters)`;
}
