/**
 * Supervision of a running cluster: monitor its health and, on the first evidence of a broken
 * pipeline (a process gone, the coordinator unhealthy — its silence only while the daemon reaches one
 * of the cluster's nodes, or after the monitor's cut-off grace — a transport port refused or cut off),
 * deregister it from the router and tear it down (a pipeline cannot survive the loss of a stage). A
 * node that merely stops answering over SSH is reported through the monitor's `onUnobservable`, and
 * the cluster keeps serving. The reconciler calls this once a launch is ready and stops it before
 * its own teardown.
 */
import { describeDeath, monitorCluster, type DeathEvent, type MonitorOptions } from "../health/index.js";
import type { LedgerEntry, LedgerProcess } from "./ledger.js";
import { keepLogsBounded, type LogLimits } from "./log-keeper.js";
import { processLabel } from "./processes.js";
import { processKey, teardownCluster, type TeardownContext, type TeardownResult } from "./teardown.js";

export interface SuperviseOptions extends TeardownContext {
  /** Health monitor tuning and callbacks: poll interval (default 1000 ms), strikes (default 2), layers, probe deadline, onUnobservable/onObservable/onCutOff. */
  monitor?: Omit<MonitorOptions, "onDeath" | "nodeFor">;
  /** Called the moment a death is detected, before teardown begins. */
  onDeath?: (event: DeathEvent) => void;
  /** How the engines' logs are kept bounded while the cluster runs (see log-keeper.ts); default its defaults. */
  logs?: LogLimits;
  /** A log was past its limit: its end kept in `<log>.1`, the log emptied. */
  onLogTrimmed?: (node: string, file: string, bytes: number) => void;
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
  /** Whether the monitor saw a member gone and is judging which went first, its death not yet reported. */
  judging(): boolean;
}

function labelOf(process: LedgerProcess): string {
  return processLabel(process.role, process.index);
}

export function superviseCluster(entry: LedgerEntry, options: SuperviseOptions): Supervision {
  let resolveEnded!: (outcome: SupervisionOutcome) => void;
  const ended = new Promise<SupervisionOutcome>((resolve) => (resolveEnded = resolve));
  let handling: Promise<void> | undefined;

  const handleDeath = async (death: DeathEvent): Promise<void> => {
    options.onEvent?.({ at: death.at, step: "cluster-unhealthy", detail: `${death.reason}: ${describeDeath(death)}` });
    try {
      // The ledger is the freshest record of what runs (and of what an earlier pass left behind).
      const current = (await options.ledger.read(entry.cluster)) ?? entry;
      // The processes the monitor saw exit (the one blamed and those that exited because of it) are
      // not asked about again (only their groups, for an engine that outlived its wrapper).
      const exited = death.reason === "StageDied" || death.reason === "CoordinatorDied" ? [death.label, ...(death.consequences ?? []).map((c) => c.label)] : [];
      const dead = entry.processes.filter((p) => exited.includes(labelOf(p)));
      const seenGone = new Set([...(options.seenGone ?? []), ...dead.map(processKey)]);
      // A death: the pipeline is broken, nothing is left to finish; everything is stopped at once.
      const result = await teardownCluster(current, { ...options, seenGone, atOnce: true });
      resolveEnded({ death, teardown: { ok: true, result } });
    } catch (error) {
      resolveEnded({ death, teardown: { ok: false, error } });
    }
  };

  const logs = keepLogsBounded(entry, options.nodeFor, options.logs, options.onLogTrimmed);
  const monitor = monitorCluster(entry, {
    ...options.monitor,
    nodeFor: options.nodeFor,
    onDeath: (death) => {
      void logs.stop();
      options.onDeath?.(death);
      handling = handleDeath(death);
    },
  });

  return {
    ended,
    stop: async () => {
      await Promise.all([monitor.stop(), logs.stop()]);
      await handling;
    },
    judging: () => monitor.judging(),
  };
}
