/**
 * Models whose cluster is being relaunched. While a crashed stage is replaced (a teardown and a
 * launch, seconds to minutes) the cluster has no backend in the router's YAML, and a router that
 * knows nothing more answers 404 "model does not exist" — which OpenAI clients never retry. The
 * daemon therefore marks the model as relaunching, with an expiry, and the embedded router answers
 * 503 with Retry-After for it (clients retry those) until a backend serves it again or the mark
 * expires.
 *
 * The marks live in a small JSON file beside the router's YAML (`<config>.relaunching.json`), not in
 * the YAML itself: whether continuum-router accepts unknown keys in its config is not documented,
 * and a config it refused would take every backend down. continuum-router ignores the sidecar (it
 * keeps answering 404 there); only the embedded router reads it.
 */
import { readRegularText } from "../files/index.js";
import { ShardctlError } from "../errors/index.js";

/** How long a mark lasts when the caller does not say, ms (60 s): longer than a relaunch of the test-size models, short enough that a cluster that never returns is a 404 again soon. */
export const defaultRelaunchMarkMs = 60_000;

/** Largest marks file read, bytes (1 MiB): one line per model being relaunched. */
export const maxRelaunchFileBytes = 1024 * 1024;

/** Model name → the time its mark expires, ms since the epoch. */
export type RelaunchMarks = ReadonlyMap<string, number>;

/** The marks file that belongs to router config `configFile`. */
export function relaunchFileOf(configFile: string): string {
  return `${configFile}.relaunching.json`;
}

/** Reads the marks; a missing file is no marks. Throws ShardctlError `RouterRelaunchMarkFailed` naming the file otherwise. */
export async function readRelaunchMarks(file: string): Promise<Map<string, number>> {
  let text: string;
  try {
    text = await readRegularText(file, { maxBytes: maxRelaunchFileBytes, what: "relaunch marks file" });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return new Map();
    throw new ShardctlError("RouterRelaunchMarkFailed", `cannot read ${file}: ${(error as Error).message}`, { cause: error });
  }
  return parseRelaunchMarks(text, file);
}

/** `{"relaunching": {"<model>": {"until": "<ISO time>"}}}` → marks; `source` names the file in errors. */
export function parseRelaunchMarks(text: string, source: string): Map<string, number> {
  const fail = (message: string): ShardctlError => new ShardctlError("RouterRelaunchMarkFailed", `${source}: ${message}`);
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (error) {
    throw fail(`not valid JSON (${(error as Error).message})`);
  }
  const entries = (raw as { relaunching?: unknown } | null)?.relaunching;
  if (typeof entries !== "object" || entries === null || Array.isArray(entries)) throw fail("expected an object with a `relaunching` object");
  const marks = new Map<string, number>();
  for (const [model, value] of Object.entries(entries as Record<string, unknown>)) {
    const until = Date.parse(String((value as { until?: unknown } | null)?.until));
    if (Number.isNaN(until)) throw fail(`relaunching["${model}"].until is not an ISO time`);
    marks.set(model, until);
  }
  return marks;
}

/** The file's text for `marks` (sorted, so an unchanged set writes identical text). */
export function renderRelaunchMarks(marks: RelaunchMarks): string {
  const relaunching: Record<string, { until: string }> = {};
  for (const model of [...marks.keys()].sort()) relaunching[model] = { until: new Date(marks.get(model)!).toISOString() };
  const note =
    "Written by shardctl: models whose cluster is being relaunched. The embedded router answers 503 with Retry-After for them until `until` or until a backend serves them again.";
  return `${JSON.stringify({ note, relaunching }, null, 2)}\n`;
}

/** Milliseconds left on `model`'s mark at `now`, or undefined when it has none or it expired. */
export function relaunchMsLeft(marks: RelaunchMarks, model: string, now: number): number | undefined {
  const until = marks.get(model);
  return until === undefined || until <= now ? undefined : until - now;
}
