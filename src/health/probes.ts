/**
 * The three probes health is made of. Each answers "yes", "no" or "could not tell", so callers can
 * treat a definite answer at once and count strikes for the doubtful ones.
 */
import type { NodeAccess } from "../nodes/index.js";
import type { CoordinatorHealth, TransportState, WatchedProcess } from "./types.js";

/** Default per-probe deadline, ms. */
export const defaultProbeTimeoutMs = 1_000;

/** A liveness answer; `error` says why it is "unknown". */
export interface LivenessProbe {
  state: "alive" | "gone" | "unknown";
  error?: string;
}

/**
 * "alive" when pid and start time match, "gone" when not (exited or recycled), "unknown" when the
 * node did not answer. A failed command is retried once (`attempts`, default 2): an SSH channel can
 * close without its exit status now and then, and one lost answer is not worth a strike.
 */
export async function probeLiveness(node: NodeAccess, process: WatchedProcess, attempts = 2): Promise<LivenessProbe> {
  let error: unknown;
  for (let attempt = 0; attempt < attempts; attempt++) {
    try {
      return { state: (await node.processStartTime(process.pid)) === process.startTime ? "alive" : "gone" };
    } catch (e) {
      error = e;
    }
  }
  return { state: "unknown", error: error instanceof Error ? error.message : String(error) };
}

/** Whether host:port accepts TCP connections from `prober`. */
export async function probeTransport(prober: NodeAccess, host: string, port: number, timeoutMs = defaultProbeTimeoutMs): Promise<TransportState> {
  try {
    return (await prober.isPortOpen(host, port, timeoutMs)) ? "listening" : "closed";
  } catch {
    return "unknown";
  }
}

/** GET {url}/health from the control machine. */
export async function probeCoordinatorHealth(url: string, timeoutMs = defaultProbeTimeoutMs): Promise<CoordinatorHealth> {
  try {
    const response = await fetch(`${url}/health`, { signal: AbortSignal.timeout(timeoutMs) });
    await response.body?.cancel();
    if (response.status === 200) return "ok";
    if (response.status === 503) return "loading";
    return "down";
  } catch (error) {
    return isRefused(error) ? "down" : "unknown";
  }
}

// fetch wraps the socket error: ECONNREFUSED is a definite "nothing listens"; a timeout or a reset
// (common under load) is not.
function isRefused(error: unknown): boolean {
  const cause = (error as { cause?: { code?: unknown } } | undefined)?.cause;
  return cause?.code === "ECONNREFUSED";
}
