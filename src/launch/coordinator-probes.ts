/**
 * What "the coordinator is up" means: `/health` answers 200, and then a one-token completion
 * succeeds — a listening server is not a working pipeline (vLLM's /v1/models answers while
 * generation is dead).
 */

/** True once GET {url}/health answers 200. */
export async function isCoordinatorHealthy(url: string, timeoutMs = 2_000): Promise<boolean> {
  try {
    const response = await fetch(`${url}/health`, { signal: AbortSignal.timeout(timeoutMs) });
    await response.body?.cancel();
    return response.status === 200;
  } catch {
    return false;
  }
}

/** Generate one token through the pipeline; resolves on success, throws with what went wrong. */
export async function probeOneToken(url: string, timeoutMs: number): Promise<void> {
  const response = await fetch(`${url}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    // No "model": engines differ in the name they serve, and the probe is about the pipeline.
    body: JSON.stringify({ prompt: "ping", max_tokens: 1, temperature: 0 }),
    signal: AbortSignal.timeout(timeoutMs),
  });
  const text = await response.text();
  if (response.status !== 200) throw new Error(`POST /v1/completions answered ${response.status}: ${text.slice(0, 300)}`);
  const body = JSON.parse(text) as { choices?: Array<{ text?: unknown }>; usage?: { completion_tokens?: number } };
  if (!Array.isArray(body.choices) || body.choices.length === 0 || typeof body.choices[0]?.text !== "string") {
    throw new Error(`POST /v1/completions answered without a completion: ${text.slice(0, 300)}`);
  }
}
