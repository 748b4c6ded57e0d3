/**
 * Supervision of a running cluster: monitor its health and, on the first stage or coordinator
 * death, deregister it from the router and tear it down (a pipeline cannot survive the loss of a
 * stage). The reconciler calls this once a launch is ready and stops it before its own teardown.
 */
import { monitorCluster, type DeathEvent, type MonitorOptions } from "../health/index.js";
import type { LedgerEntry } from "./ledger.js";
import { teardownCluster, type TeardownContext, type TeardownResult } from "./teardown.js";

export interface SuperviseOptions extends TeardownContext {
  /** Health monitor tuning: poll interval (default 1000 ms), strikes (default 3), layers, probe deadline. */
  monitor?: Omit<MonitorOptions, "onDeath" | "nodeFor">;
  /** Called the moment a death is detected, before teardown begins. */
  onDeath?: (event: DeathEvent) => void;
}

/** How a supervision ended: the death that ended it and how the teardown went. */
export interface SupervisionOutcome {
  death: DeathEvent;
  teardown: { ok: true; result: TeardownResult } | { ok: false; error: unknown };
}

export interface Supervision {
  /** Resolves when a death was handled; stays pending while the cluster is healthy. */
  readonly ended: Promise<SupervisionOutcome>;
  /** Stop supervising without touching the cluster (a deliberate teardown or shutdown). */
  stop(): Promise<void>;
}

export function superviseCluster(entry: LedgerEntry, options: SuperviseOptions): Supervision {
  let resolveEnded!: (outcome: SupervisionOutcome) => void;
  const ended = new Promise<SupervisionOutcome>((resolve) => (resolveEnded = resolve));
  let handling: Promise<void> | undefined;

  const handleDeath = async (death: DeathEvent): Promise<void> => {
    options.onEvent?.({ at: death.at, step: "cluster-unhealthy", detail: `${death.reason}: ${death.label} on ${death.node}: ${death.detail}` });
    try {
      // The ledger is the freshest record of what runs (and of what an earlier pass left behind).
      const current = (await options.ledger.read(entry.cluster)) ?? entry;
      const result = await teardownCluster(current, options);
      resolveEnded({ death, teardown: { ok: true, result } });
    } catch (error) {
      resolveEnded({ death, teardown: { ok: false, error } });
    }
  };

  const monitor = monitorCluster(entry, {
    ...options.monitor,
    nodeFor: options.nodeFor,
    onDeath: (death) => {
      options.onDeath?.(death);
      handling = handleDeath(death);
    },
  });

  return {
    ended,
    stop: async () => {
      await monitor.stop();
      await handling;
    },
  };
}
