/**
 * Continuous health of a running cluster. Process death is learned from exit watches (a long-lived
 * command on the process's node that returns the moment it exits), with polling as the fallback;
 * a process whose start time no longer matches is a death at once (every engine's pipeline ends
 * with any of its processes: readiness.processExit). Doubtful probes (a node that does not
 * answer, a closed transport port, a coordinator health endpoint not answering the engine's ready
 * status) count strikes and fail the cluster only after `strikes` in a row. `onDeath` is called at most once; after it
 * the monitor stops itself (the pipeline is lost and is being torn down).
 */
import { coordinatorOf, labelOf, proberNodeName, stagesOf, transportPortOf } from "./labels.js";
import { defaultProbeTimeoutMs, readinessOf, probeCoordinatorHealth, probeLiveness, probeTransport } from "./probes.js";
import { StrikeCounter } from "./strike-counter.js";
import type { DeathEvent, DeathReason, HealthDeps, WatchedCluster, WatchedProcess } from "./types.js";

export interface MonitorOptions extends HealthDeps {
  onDeath: (event: DeathEvent) => void;
  /** Time between polls, ms. Default 1000. */
  pollIntervalMs?: number;
  /** Consecutive doubtful probes before the cluster is declared dead. Default 3. */
  strikes?: number;
  /** Start exit watches (polling alone when false). Default true. */
  exitWatch?: boolean;
  /** Pause before restarting an exit watch that ended without the process ending, ms. Default 1000. */
  rewatchDelayMs?: number;
}

export interface ClusterMonitor {
  /** Stop watching and polling; resolves once every watcher and probe in flight has ended. */
  stop(): Promise<void>;
}

export function monitorCluster(cluster: WatchedCluster, options: MonitorOptions): ClusterMonitor {
  const { pollIntervalMs = 1_000, strikes: limit = 3, exitWatch = true, rewatchDelayMs = 1_000 } = options;
  const timeoutMs = options.probeTimeoutMs ?? defaultProbeTimeoutMs;
  const readiness = readinessOf(cluster);
  const controller = new AbortController();
  const strikes = new StrikeCounter(limit);
  const pending = new Set<Promise<void>>();
  let timer: NodeJS.Timeout | undefined;
  let done = false;

  const track = (work: Promise<void>): void => {
    pending.add(work);
    void work.finally(() => pending.delete(work));
  };

  const die = (process: WatchedProcess, reason: DeathReason, detail: string): void => {
    if (done) return;
    done = true;
    controller.abort();
    if (timer !== undefined) clearTimeout(timer);
    options.onDeath({ cluster: cluster.cluster, label: labelOf(process), node: process.node, reason, detail, at: new Date().toISOString() });
  };
  const diedReason = (process: WatchedProcess): DeathReason => (process.role === "stage" ? "StageDied" : "CoordinatorDied");

  // Watch every process's exit.
  const watch = async (process: WatchedProcess): Promise<void> => {
    const node = options.nodeFor(process.node);
    while (!controller.signal.aborted) {
      try {
        await node.watchExit(process.pid, process.startTime, { signal: controller.signal });
      } catch {
        // The watch could not run (node unreachable): polling covers this process meanwhile.
      }
      if (controller.signal.aborted) return;
      // A watch also ends when its channel drops: confirm before declaring a death.
      const { state } = await probeLiveness(node, process);
      if (state === "gone") return die(process, diedReason(process), `pid ${process.pid} exited`);
      await sleep(rewatchDelayMs, controller.signal);
    }
  };
  if (exitWatch) for (const process of cluster.processes) track(watch(process));

  // Poll: liveness of each process, each stage's transport port, the coordinator's /health.
  const poll = async (): Promise<void> => {
    const proberName = proberNodeName(cluster);
    const coordinator = coordinatorOf(cluster);
    const checks: Array<Promise<void>> = [];
    for (const process of cluster.processes) {
      checks.push(
        probeLiveness(options.nodeFor(process.node), process).then(({ state, error }) => {
          const key = `${labelOf(process)}:liveness`;
          if (state === "gone") return die(process, diedReason(process), `pid ${process.pid} is no longer running`);
          if (state === "alive") return strikes.clear(key);
          if (strikes.strike(key)) die(process, diedReason(process), `${limit} liveness probes in a row failed on ${process.node}: ${error ?? "no answer"}`);
        }),
      );
    }
    for (const process of stagesOf(cluster)) {
      const port = transportPortOf(cluster, process.index ?? 0);
      if (port === undefined || proberName === undefined) continue;
      checks.push(
        probeTransport(options.nodeFor(proberName), port.host, port.port, timeoutMs).then((state) => {
          const key = `${labelOf(process)}:transport`;
          if (state === "listening") return strikes.clear(key);
          if (strikes.strike(key)) die(process, "StagePortClosed", `transport ${port.host}:${port.port} was ${state} for ${limit} probes in a row`);
        }),
      );
    }
    if (coordinator !== undefined && cluster.coordinatorUrl !== undefined) {
      const url = cluster.coordinatorUrl;
      checks.push(
        probeCoordinatorHealth(url, readiness, timeoutMs).then((health) => {
          if (health === "ok") return strikes.clear("coordinator:health");
          if (strikes.strike("coordinator:health")) die(coordinator, "CoordinatorUnhealthy", `${url}${readiness.healthPath} was ${health} for ${limit} probes in a row`);
        }),
      );
    }
    await Promise.all(checks);
  };
  const schedule = (): void => {
    if (done) return;
    timer = setTimeout(() => {
      timer = undefined;
      const tick = poll().finally(schedule);
      track(tick);
    }, pollIntervalMs);
  };
  schedule();

  return {
    stop: async () => {
      done = true;
      controller.abort();
      if (timer !== undefined) clearTimeout(timer);
      while (pending.size > 0) await Promise.allSettled([...pending]);
    },
  };
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done(): void {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    }
    signal.addEventListener("abort", done, { once: true });
  });
}
