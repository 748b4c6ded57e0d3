/**
 * mlx-lm's word that a prompt moves: rank 0's server logs each step of a prompt it processes
 * (`--prefill-step-size` tokens, 2048 by default) through Python's logging, at INFO:
 * `2026-12-05 18:01:08,123 - INFO - Prompt processing progress: 4096/90000`. Its generation loop
 * takes no new request in meanwhile, so these lines are what tells a long prompt from a hung ring.
 */
import type { PromptStep } from "../types.js";

// Anchored: the server logs request lines it refuses, and a client must not forge a step.
const stepLine = /^(\d{4})-(\d{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2}),(\d{3}) - INFO - Prompt processing progress: (\d+)\/(\d+)/;

/**
 * The step a log line says, or undefined. The time is the node's local time read as if UTC: only
 * differences count (a clock change during a prompt makes one step look longer, and the watchdog
 * waits longer for the next).
 */
export function promptStepIn(line: string): PromptStep | undefined {
  const m = stepLine.exec(line);
  if (m === null) return undefined;
  const [year, month, day, hour, minute, second, ms, done, total] = m.slice(1).map(Number) as [number, number, number, number, number, number, number, number, number];
  return { atMs: Date.UTC(year, month - 1, day, hour, minute, second, ms), done, total };
}
