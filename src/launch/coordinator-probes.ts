/**
 * What "the coordinator is up" means: its health endpoint answers the engine's ready status, and
 * then a one-token completion succeeds — a listening server is not a working pipeline (vLLM's
 * /v1/models answers while generation is dead). Paths and statuses are the engine's readiness facts.
 */
import { setTimeout as delay } from "node:timers/promises";
import type { EngineReadiness } from "../engines/index.js";
import { asksForModel, clipLine, notReadyAnswer, notReadyBodyChars, readCapped, readStart } from "../health/index.js";

/**
 * What GET {url}{healthPath} answered: `healthy` once it is the ready status; `said` is the answer
 * in words for a launch that waits in vain ("answered 404: Not Found", "refused the connection"),
 * so its timeout tells a server that answers wrongly from one that is slow or not there.
 */
export async function askCoordinatorHealth(url: string, readiness: EngineReadiness, timeoutMs = 2_000): Promise<{ healthy: boolean; said: string }> {
  try {
    const response = await fetch(`${url}${readiness.healthPath}`, { signal: AbortSignal.timeout(timeoutMs) });
    if (response.status === readiness.readyStatus) {
      await response.body?.cancel();
      return { healthy: true, said: `answered ${response.status}` };
    }
    // The whole body (within the cap) says loading or broken; 200 characters of it are shown.
    const whole = await readStart(response, notReadyBodyChars);
    const body = clipLine(whole, 200);
    const loading = notReadyAnswer(readiness, response.status, whole).health === "loading" ? " (loading)" : "";
    return { healthy: false, said: `answered ${response.status}${loading}${body === "" ? "" : `: ${body}`}` };
  } catch (error) {
    const code = (error as { cause?: { code?: unknown } }).cause?.code;
    if (code === "ECONNREFUSED") return { healthy: false, said: "refused the connection: nothing listens there" };
    if (error instanceof Error && error.name === "TimeoutError") return { healthy: false, said: `did not answer within ${timeoutMs} ms` };
    return {
      healthy: false,
      said: `could not be asked: ${error instanceof Error ? (error.cause instanceof Error ? error.cause.message : error.message) : String(error)}`,
    };
  }
}

/** Pause between two tries of the one-token probe while the engine answers 503 (not ready yet), ms. */
const retryMs = 500;

/**
 * Most of a one-token completion's answer read, bytes (1 MiB): a real one is a few hundred bytes, and
 * an engine that sends more, or a body without end, must not fill the daemon's memory.
 */
const completionBodyBytes = 1 << 20;

/**
 * Generate one token through the pipeline within `timeoutMs`; resolves on success, throws with what
 * went wrong. A 503 is asked again (see below); any other answer ends it, but for one that refuses
 * the request for want of its `model` (a 400, 404 or 422 naming it), asked again once naming
 * `model`, the name the engine serves.
 */
export async function probeOneToken(url: string, readiness: EngineReadiness, timeoutMs: number, cancel?: AbortSignal, model?: string): Promise<void> {
  const path = readiness.completionsPath;
  const deadline = AbortSignal.timeout(timeoutMs);
  const signal = cancel === undefined ? deadline : AbortSignal.any([deadline, cancel]);
  let response: Response | undefined;
  let text: string;
  // What the last try said, when the probe was asked again: the deadline's message quotes it.
  let last = "";
  // No "model" at first: engines differ in the name they serve, and the probe is about the pipeline.
  let named: string | undefined;
  for (;;) {
    response = undefined;
    try {
      response = await fetch(`${url}${path}`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ ...(named === undefined ? {} : { model: named }), prompt: "ping", max_tokens: 1, temperature: 0 }),
        signal,
      });
      const body = await readCapped(response, completionBodyBytes);
      text = body.text;
      if (body.over) {
        throw new Error(
          `POST ${path} answered ${response.status} with a body past ${completionBodyBytes} bytes, where a one-token completion takes a few hundred: ${clipLine(text, 300)}`,
        );
      }
    } catch (error) {
      // fetch says only "The operation was aborted due to timeout": say which request and how long.
      if (deadline.aborted && response !== undefined)
        throw new Error(`POST ${path} answered ${response.status}, but its body did not end within ${timeoutMs} ms`, { cause: error });
      if (deadline.aborted && last !== "") {
        // The hint only for a 503 that reads as loading, not one that says its pipeline broke or it stops.
        const hint = /broken|shutting|stopping/i.test(last) ? "" : " (still loading: a model that loads longer needs [engine] load_timeout_seconds above its load time)";
        throw new Error(`POST ${path} did not answer 200 within ${timeoutMs} ms; it last ${last}${hint}`, { cause: error });
      }
      if (deadline.aborted) throw new Error(`POST ${path} did not answer within ${timeoutMs} ms`, { cause: error });
      throw error;
    }
    // An engine that wants to be told the model: asked once more, naming the one it serves.
    if (named === undefined && model !== undefined && asksForModel(response.status, text)) {
      named = model;
      continue;
    }
    // 503: the engine says it is not ready yet (a model still loading behind a /health that
    // answers 200 early): asked again every retryMs until the deadline.
    if (response.status !== 503) break;
    last = `answered 503: ${text.slice(0, 300)}`;
    await delay(retryMs, undefined, { signal }).catch(() => undefined);
  }
  if (response.status !== 200) {
    // Only a 503 is read as "not ready yet": an engine that says so otherwise fails its launch at once.
    const loading = response.status >= 500 ? " (only a 503 is taken for an engine still loading and asked again; any other answer fails the launch)" : "";
    throw new Error(`POST ${path} answered ${response.status}: ${text.slice(0, 300)}${loading}`);
  }
  let body: { choices?: Array<{ text?: unknown }>; usage?: { completion_tokens?: number } };
  try {
    body = JSON.parse(text) as typeof body;
  } catch {
    // A proxy's page, or another server on the port: say what came, not the parser's words.
    throw new Error(`POST ${path} answered 200 with a body that is not JSON, so not an OpenAI completion: ${text.slice(0, 300)}`);
  }
  if (typeof body !== "object" || body === null || !Array.isArray(body.choices) || body.choices.length === 0 || typeof body.choices[0]?.text !== "string") {
    throw new Error(`POST ${path} answered without a completion: ${text.slice(0, 300)}`);
  }
}
