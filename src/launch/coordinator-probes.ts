/**
 * What "the coordinator is up" means: its health endpoint answers the engine's ready status, and
 * then a one-token completion succeeds — a listening server is not a working pipeline (vLLM's
 * /v1/models answers while generation is dead). Paths and statuses are the engine's readiness facts.
 */
import type { EngineReadiness } from "../engines/index.js";

/** True once GET {url}{healthPath} answers the ready status. */
export async function isCoordinatorHealthy(url: string, readiness: EngineReadiness, timeoutMs = 2_000): Promise<boolean> {
  try {
    const response = await fetch(`${url}${readiness.healthPath}`, { signal: AbortSignal.timeout(timeoutMs) });
    await response.body?.cancel();
    return response.status === readiness.readyStatus;
  } catch {
    return false;
  }
}

/** Generate one token through the pipeline; resolves on success, throws with what went wrong. */
export async function probeOneToken(url: string, readiness: EngineReadiness, timeoutMs: number): Promise<void> {
  const path = readiness.completionsPath;
  const deadline = AbortSignal.timeout(timeoutMs);
  let response: Response;
  let text: string;
  try {
    response = await fetch(`${url}${path}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      // No "model": engines differ in the name they serve, and the probe is about the pipeline.
      body: JSON.stringify({ prompt: "ping", max_tokens: 1, temperature: 0 }),
      signal: deadline,
    });
    text = await response.text();
  } catch (error) {
    // fetch says only "The operation was aborted due to timeout": say which request and how long.
    if (deadline.aborted) throw new Error(`POST ${path} did not answer within ${timeoutMs} ms`, { cause: error });
    throw error;
  }
  if (response.status !== 200) throw new Error(`POST ${path} answered ${response.status}: ${text.slice(0, 300)}`);
  const body = JSON.parse(text) as { choices?: Array<{ text?: unknown }>; usage?: { completion_tokens?: number } };
  if (!Array.isArray(body.choices) || body.choices.length === 0 || typeof body.choices[0]?.text !== "string") {
    throw new Error(`POST ${path} answered without a completion: ${text.slice(0, 300)}`);
  }
}
