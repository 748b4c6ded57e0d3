/**
 * Models the router knows of that no backend serves now. While a crashed stage is replaced (a
 * teardown and a launch, seconds to minutes) the cluster has no backend in the router's YAML, and a
 * router that knows nothing more answers 404 "model does not exist" — which OpenAI clients never
 * retry. The daemon therefore marks the model as relaunching, with an expiry, and the embedded
 * router answers 503 with Retry-After for it (clients retry those) until a backend serves it again
 * or the mark expires. A model whose cluster stalled (its restart budget spent, or a launch that
 * cannot succeed) will not come back by itself: the daemon marks it stalled, naming the cluster and
 * the reason, and the router answers 503 `model_stalled` saying so, instead of a 404 a client reads
 * as a typo in the model's name. A stalled mark lasts until the cluster serves, comes back or is
 * no longer stalled; the daemon drops every stalled mark as it starts and sets again those its
 * first passes find.
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

/** A model whose cluster stalled: the cluster's name, the status file's reason, since when (ms since the epoch). */
export type StalledMark = { cluster: string; reason: string; since: number };

/** The marks file's content: relaunching, model name → the time its mark expires (ms since the epoch); stalled, model name → its mark. */
export type RelaunchMarks = { relaunching: Map<string, number>; stalled: Map<string, StalledMark> };

/** No marks. */
export const noMarks = (): RelaunchMarks => ({ relaunching: new Map(), stalled: new Map() });

/** The marks file that belongs to router config `configFile`. */
export function relaunchFileOf(configFile: string): string {
  return `${configFile}.relaunching.json`;
}

/** Reads the marks; a missing file is no marks. Throws ShardctlError `RouterRelaunchMarkFailed` naming the file otherwise. */
export async function readRelaunchMarks(file: string): Promise<RelaunchMarks> {
  let text: string;
  try {
    text = await readRegularText(file, { maxBytes: maxRelaunchFileBytes, what: "relaunch marks file" });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return noMarks();
    throw new ShardctlError("RouterRelaunchMarkFailed", `cannot read ${file}: ${(error as Error).message}`, { cause: error });
  }
  return parseRelaunchMarks(text, file);
}

/**
 * `{"relaunching": {"<model>": {"until": "<ISO time>"}}, "stalled": {"<model>": {"cluster", "reason",
 * "since"}}}` → marks (`stalled` may be absent: files written before it existed); `source` names
 * the file in errors.
 */
export function parseRelaunchMarks(text: string, source: string): RelaunchMarks {
  const fail = (message: string): ShardctlError => new ShardctlError("RouterRelaunchMarkFailed", `${source}: ${message}`);
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (error) {
    throw fail(`not valid JSON (${(error as Error).message})`);
  }
  const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);
  const entries = (raw as { relaunching?: unknown } | null)?.relaunching;
  if (!isObject(entries)) throw fail("expected an object with a `relaunching` object");
  const marks = noMarks();
  for (const [model, value] of Object.entries(entries)) {
    const until = Date.parse(String((value as { until?: unknown } | null)?.until));
    if (Number.isNaN(until)) throw fail(`relaunching["${model}"].until is not an ISO time`);
    marks.relaunching.set(model, until);
  }
  const stalled = (raw as { stalled?: unknown }).stalled ?? {};
  if (!isObject(stalled)) throw fail("`stalled` is not an object");
  for (const [model, value] of Object.entries(stalled)) {
    const { cluster, reason, since } = (isObject(value) ? value : {}) as Record<string, unknown>;
    const at = Date.parse(String(since));
    if (typeof cluster !== "string" || typeof reason !== "string" || Number.isNaN(at)) {
      throw fail(`stalled["${model}"] needs \`cluster\` and \`reason\` strings and an ISO time \`since\``);
    }
    marks.stalled.set(model, { cluster, reason, since: at });
  }
  return marks;
}

/** The file's text for `marks` (sorted, so an unchanged set writes identical text). */
export function renderRelaunchMarks(marks: RelaunchMarks): string {
  const relaunching: Record<string, { until: string }> = {};
  for (const model of [...marks.relaunching.keys()].sort()) relaunching[model] = { until: new Date(marks.relaunching.get(model)!).toISOString() };
  const stalled: Record<string, { cluster: string; reason: string; since: string }> = {};
  for (const model of [...marks.stalled.keys()].sort()) {
    const mark = marks.stalled.get(model)!;
    stalled[model] = { cluster: mark.cluster, reason: mark.reason, since: new Date(mark.since).toISOString() };
  }
  const note =
    "Written by shardctl: models whose cluster is being relaunched, and models whose cluster stalled. The embedded router answers 503 with Retry-After for the first until `until` or until a backend serves them again, and 503 model_stalled for the second.";
  return `${JSON.stringify({ note, relaunching, ...(marks.stalled.size === 0 ? {} : { stalled }) }, null, 2)}\n`;
}

/** True when `marks` holds nothing. */
export const marksAreEmpty = (marks: RelaunchMarks): boolean => marks.relaunching.size === 0 && marks.stalled.size === 0;

/** Milliseconds left on `model`'s mark at `now`, or undefined when it has none or it expired. */
export function relaunchMsLeft(marks: RelaunchMarks, model: string, now: number): number | undefined {
  const until = marks.relaunching.get(model);
  return until === undefined || until <= now ? undefined : until - now;
}
