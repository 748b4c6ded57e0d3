/**
 * The probes health is made of. Each answers "yes", "no" or "could not tell" within its own
 * deadline, so callers can treat a definite answer at once, count strikes for the doubtful ones,
 * and never wait on one silent node to judge the others.
 */
import { messageOf } from "../errors/index.js";
import { defaultEngineKind, engineOf, type EngineReadiness, type GenerationWatchdog } from "../engines/index.js";
import type { NodeAccess, PortAnswer } from "../nodes/index.js";
import type { CoordinatorHealth, TransportState, WatchedCluster, WatchedProcess } from "./types.js";

/** Default per-probe deadline, ms. */
export const defaultProbeTimeoutMs = 1_000;

/**
 * The deadline a transport probe, or a node's liveness round, that went unanswered is asked again
 * with before its silence makes the last strike, ms: 5 × the probe's (5 s by default). A connection
 * over a link with seconds of round trip answers within it; a cut path stays silent, found then
 * within about 9 s (1 s to the next probe, a silent one, then one more and its second ask) where
 * in-band heartbeats do not find it first.
 */
export function slowPathTimeoutMs(timeoutMs: number): number {
  return 5 * timeoutMs;
}

/**
 * The readiness facts of the engine a cluster runs, as its ledger entry records it (entries from
 * before the kind was recorded ran the default kind).
 */
export function readinessOf(cluster: Pick<WatchedCluster, "engine">): EngineReadiness {
  return engineOf(cluster.engine ?? defaultEngineKind).readiness;
}

/**
 * Whether health may open TCP connections to a cluster's stage transport ports. The one place that
 * decides it: an engine whose transport takes any accepted connection for a peer (a ring that a
 * stray connect would break) must answer false here, and its stages are then judged by process
 * liveness and the coordinator's /health alone.
 */
export function shouldProbeTransport(cluster: Pick<WatchedCluster, "engine">): boolean {
  return readinessOf(cluster).stageUp === "transport-listening";
}

/** A liveness answer; `error` says why it is "unknown". */
export interface LivenessProbe {
  state: "alive" | "gone" | "unknown";
  error?: string;
}

export interface LivenessOptions {
  /** Tries within the deadline. Default 2. */
  attempts?: number;
  /** Deadline for all tries together, ms. Default 1000. */
  deadlineMs?: number;
}

/** The least time left for which a liveness probe tries again, ms. */
const minRetryMs = 100;

/**
 * "alive" when pid and start time match, "gone" when not (exited or recycled), "unknown" when the
 * node did not answer within the deadline. A failed command is retried once within it: an SSH
 * channel can close without its exit status now and then, and one lost answer is not worth a strike.
 */
export async function probeLiveness(node: NodeAccess, process: WatchedProcess, options: LivenessOptions = {}): Promise<LivenessProbe> {
  const { attempts = 2, deadlineMs = defaultProbeTimeoutMs } = options;
  const deadline = performance.now() + deadlineMs;
  let error: unknown;
  for (let attempt = 0; attempt < attempts; attempt++) {
    const left = Math.round(deadline - performance.now());
    // A retry with a few ms left cannot be answered (a round trip takes more): its "timed out after
    // 1 ms" would only hide the first try's own words.
    if (left <= 0 || (attempt > 0 && left < minRetryMs)) break;
    try {
      return { state: (await node.processStartTime(process.pid, { deadlineMs: left })) === process.startTime ? "alive" : "gone" };
    } catch (e) {
      error = e;
    }
  }
  return { state: "unknown", error: error === undefined ? `no answer within ${deadlineMs} ms` : messageOf(error) };
}

/**
 * What a stage's transport port answered from `prober`: "open", "refused" (its host answered: nothing
 * listens), "no-answer" (silence: the path from the prober to the stage is cut), or "unknown" (the
 * prober itself could not be asked, which says nothing about the stage).
 */
export type TransportAnswer = PortAnswer | "unknown";

export async function probeTransportPort(prober: NodeAccess, host: string, port: number, timeoutMs = defaultProbeTimeoutMs): Promise<TransportAnswer> {
  try {
    return await prober.probePort(host, port, timeoutMs);
  } catch {
    return "unknown";
  }
}

/** The card's word for an answer: a refusal is "closed"; silence cannot tell what listens: "unknown". */
export function transportStateOf(answer: TransportAnswer): TransportState {
  return answer === "open" ? "listening" : answer === "refused" ? "closed" : "unknown";
}

/** Whether host:port accepts TCP connections from `prober`, as a status card says it. */
export async function probeTransport(prober: NodeAccess, host: string, port: number, timeoutMs = defaultProbeTimeoutMs): Promise<TransportState> {
  return transportStateOf(await probeTransportPort(prober, host, port, timeoutMs));
}

/**
 * One token through the pipeline, for the generation watchdog: "answered" (a completion, or an
 * answer that is not the engine's failure: a 503 is /health's to judge, a 4xx the request's), "busy"
 * for a 429 (every slot taken and the queue full), `{ failed }` when the engine answered a server error other than 503 or, not
 * streamed, a 200 that is no OpenAI completion (it takes requests and does not generate), "taken"
 * when the engine sent the head of a streamed answer, which it does once its generation loop has
 * the request (`headMeansTaken`), but no token within `timeoutMs` (the request waits for a slot),
 * "timeout" when nothing came within `timeoutMs`, "unknown" when the request could not be made.
 */
export async function probeGeneration(
  url: string,
  readiness: EngineReadiness,
  watchdog: Pick<GenerationWatchdog, "timeoutMs" | "headMeansTaken">,
  signal?: AbortSignal,
  model?: string,
): Promise<GenerationAnswer> {
  const timeout = AbortSignal.timeout(watchdog.timeoutMs);
  let head = false;
  try {
    // No "model" at first, as the launch's probe: engines differ in the name they serve. One that
    // refuses the request for want of it (a 400, 404 or 422 naming it) is asked again naming `model`.
    const ask = (named?: string): Promise<Response> =>
      fetch(`${url}${readiness.completionsPath}`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({
          ...(named === undefined ? {} : { model: named }),
          prompt: "ping",
          max_tokens: 1,
          temperature: 0,
          ...(watchdog.headMeansTaken ? { stream: true } : {}),
        }),
        signal: signal === undefined ? timeout : AbortSignal.any([timeout, signal]),
      });
    let response = await ask();
    if (model !== undefined && modelRefusals.includes(response.status)) {
      if (!asksForModel(response.status, await readStart(response, answerCharsShown))) return "answered";
      response = await ask(model);
    }
    head = true;
    if (response.status === 429) {
      await drainBody(response);
      return "busy";
    }
    if (response.status >= 500 && response.status !== 503) {
      return { failed: `answered ${response.status}: ${await readStart(response, 300)}` };
    }
    if (response.status !== 200 || watchdog.headMeansTaken) {
      await drainBody(response);
      return "answered";
    }
    const { text } = await readCapped(response, completionBytes);
    return isCompletion(text) ? "answered" : { failed: `answered 200 with no OpenAI completion: ${clipLine(text, 300)}` };
  } catch {
    if (!timeout.aborted) return "unknown";
    return head && watchdog.headMeansTaken ? "taken" : "timeout";
  }
}

export type GenerationAnswer = "answered" | "busy" | "taken" | "timeout" | "unknown" | { failed: string };

/** Characters of a refusal's body read to see whether it asks for the model. */
const answerCharsShown = 4096;

/**
 * Whether an engine refused a completion for want of its `model` (a 400, 404 or 422 naming it):
 * the launch's probe and the watchdog's then ask again naming the model it serves.
 */
export function asksForModel(status: number, body: string): boolean {
  return modelRefusals.includes(status) && /model/i.test(body);
}

/** The statuses an engine refuses a request with for want of its `model`. */
const modelRefusals = [400, 404, 422];

/** Bytes of a one-token completion read to judge it (a few hundred in practice). */
const completionBytes = 64 * 1024;

/** Whether `text` is an OpenAI completion: JSON with a non-empty `choices` array. */
function isCompletion(text: string): boolean {
  try {
    const body = JSON.parse(text) as { choices?: unknown } | null;
    return typeof body === "object" && body !== null && Array.isArray(body.choices) && body.choices.length > 0;
  } catch {
    return false;
  }
}

/**
 * The engine's count of tokens generated so far, from its ready /health answer (`progressIn`):
 * undefined when the engine gives none, or /health does not answer 200 with one in time.
 */
export async function probeProgress(url: string, readiness: EngineReadiness, signal?: AbortSignal): Promise<number | undefined> {
  const progressIn = readiness.progressIn;
  if (progressIn === undefined) return undefined;
  const body = await readyBody(url, readiness, signal);
  return body === undefined ? undefined : progressIn(body);
}

/** The body of a ready /health answer, or undefined for any other answer, none, or one too long. */
async function readyBody(url: string, readiness: EngineReadiness, signal?: AbortSignal): Promise<string | undefined> {
  try {
    const timeout = AbortSignal.timeout(defaultProbeTimeoutMs);
    const response = await fetch(`${url}${readiness.healthPath}`, { signal: signal === undefined ? timeout : AbortSignal.any([timeout, signal]) });
    if (response.status !== readiness.readyStatus) {
      await response.body?.cancel();
      return undefined;
    }
    const body = await readCapped(response, notReadyBodyChars);
    return body.over ? undefined : body.text;
  } catch {
    return undefined;
  }
}

/**
 * What the coordinator's /health answered: its health and, for a not-ready answer that says why,
 * the engine's words (at most `saidChars` characters, on one line).
 */
export interface CoordinatorAnswer {
  health: CoordinatorHealth;
  said?: string;
}

/**
 * GET {url}{healthPath} from the control machine; the engine's statuses say ready or loading. An
 * engine whose "loading" status also means a broken pipeline (shard-engine answers 503 for both)
 * tells them apart by the body: a broken one is "down", in the engine's words.
 */
export async function probeCoordinatorHealth(url: string, readiness: EngineReadiness, timeoutMs = defaultProbeTimeoutMs): Promise<CoordinatorAnswer> {
  try {
    const response = await fetch(`${url}${readiness.healthPath}`, { signal: AbortSignal.timeout(timeoutMs) });
    if (response.status === readiness.readyStatus) {
      await response.body?.cancel();
      return { health: "ok" };
    }
    return notReadyAnswer(readiness, response.status, await readStart(response, notReadyBodyChars));
  } catch (error) {
    return { health: isRefused(error) ? "down" : "unknown" };
  }
}

/**
 * What a /health answer other than ready means: the engine's loading status is "loading" unless
 * its body (read up to `notReadyBodyChars`) says the pipeline is broken; anything else is "down".
 */
export function notReadyAnswer(readiness: EngineReadiness, status: number, body: string): CoordinatorAnswer {
  if (status === readiness.loadingStatus) {
    const broken = readiness.brokenIn?.(body);
    return broken === undefined ? { health: "loading" } : { health: "down", said: clipLine(broken, saidChars) };
  }
  return { health: "down", said: clipLine(`answered ${status}${body === "" ? "" : `: ${body}`}`, saidChars) };
}

/** "loading", or "down (Stage link(s) dead: stage-0)": the health with what the engine said. */
export function healthInWords(answer: CoordinatorAnswer): string {
  return answer.said === undefined ? answer.health : `${answer.health} (${answer.said})`;
}

/** How much of a not-ready /health body is read, characters: an engine's JSON error fits many times over. */
export const notReadyBodyChars = 16_384;
/** How much of it a status says, characters. */
const saidChars = 200;

/** The first `chars` characters of a body, on one line; the rest is not read. */
export async function readStart(response: Response, chars: number): Promise<string> {
  const reader = response.body?.getReader();
  if (reader === undefined) return "";
  const decoder = new TextDecoder();
  let text = "";
  try {
    while (text.length < chars) {
      const { value, done } = await reader.read();
      if (done) break;
      text += decoder.decode(value, { stream: true });
    }
  } finally {
    await reader.cancel().catch(() => undefined);
  }
  return clipLine(text, chars);
}

/**
 * A body read whole when it ends within `maxBytes`; past that the rest is not read (`over`), so an
 * engine that answers with an endless or huge body costs the daemon `maxBytes` of memory at most.
 */
export async function readCapped(response: Response, maxBytes: number): Promise<{ text: string; over: boolean }> {
  const reader = response.body?.getReader();
  if (reader === undefined) return { text: "", over: false };
  const chunks: Uint8Array[] = [];
  let bytes = 0;
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return { text: Buffer.concat(chunks).toString("utf8"), over: false };
      chunks.push(value);
      bytes += value.byteLength;
      if (bytes > maxBytes) return { text: Buffer.concat(chunks).subarray(0, maxBytes).toString("utf8"), over: true };
    }
  } finally {
    await reader.cancel().catch(() => undefined);
  }
}

/** Read a body to its end and keep none of it (a probe that needs only to know it ended). */
export async function drainBody(response: Response): Promise<void> {
  const reader = response.body?.getReader();
  if (reader === undefined) return;
  try {
    while (!(await reader.read()).done);
  } finally {
    await reader.cancel().catch(() => undefined);
  }
}

/** `text` on one line (an engine's JSON message may hold newlines), cut to `chars` characters. */
export function clipLine(text: string, chars: number): string {
  const line = text.replace(/\s+/g, " ").trim();
  return line.length > chars ? `${line.slice(0, chars)}…` : line;
}

// fetch wraps the socket error: ECONNREFUSED is a definite "nothing listens"; a timeout or a reset
// (common under load) is not.
function isRefused(error: unknown): boolean {
  const cause = (error as { cause?: { code?: unknown } } | undefined)?.cause;
  return cause?.code === "ECONNREFUSED";
}
