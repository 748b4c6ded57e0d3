/**
 * The three probes health is made of. Each answers "yes", "no" or "could not tell", so callers can
 * treat a definite answer at once and count strikes for the doubtful ones.
 */
import { messageOf } from "../errors/index.js";
import { defaultEngineKind, engineOf, type EngineReadiness } from "../engines/index.js";
import type { NodeAccess } from "../nodes/index.js";
import type { CoordinatorHealth, TransportState, WatchedCluster, WatchedProcess } from "./types.js";

/** Default per-probe deadline, ms. */
export const defaultProbeTimeoutMs = 1_000;

/**
 * The readiness facts of the engine a cluster runs, as its ledger entry records it (entries from
 * before the kind was recorded ran the default kind).
 */
export function readinessOf(cluster: Pick<WatchedCluster, "engine">): EngineReadiness {
  return engineOf(cluster.engine ?? defaultEngineKind).readiness;
}

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
  return { state: "unknown", error: messageOf(error) };
}

/** Whether host:port accepts TCP connections from `prober`. */
export async function probeTransport(prober: NodeAccess, host: string, port: number, timeoutMs = defaultProbeTimeoutMs): Promise<TransportState> {
  try {
    return (await prober.isPortOpen(host, port, timeoutMs)) ? "listening" : "closed";
  } catch {
    return "unknown";
  }
}

/** GET {url}{healthPath} from the control machine; the engine's statuses say ready or loading. */
export async function probeCoordinatorHealth(url: string, readiness: EngineReadiness, timeoutMs = defaultProbeTimeoutMs): Promise<CoordinatorHealth> {
  try {
    const response = await fetch(`${url}${readiness.healthPath}`, { signal: AbortSignal.timeout(timeoutMs) });
    await response.body?.cancel();
    if (response.status === readiness.readyStatus) return "ok";
    if (response.status === readiness.loadingStatus) return "loading";
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
