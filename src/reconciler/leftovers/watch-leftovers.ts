/**
 * Leftovers on a node that did not answer a teardown (a partition) are stopped by the first pass
 * that reaches the node. Failed passes back off (up to 60 s) and each rewrites the status file, so
 * retrying faster is no answer. Instead the node is watched — the health monitor's liveness loop,
 * a probe every `pollIntervalMs` (1000 ms) with its deadline (1000 ms), over the pool's connection,
 * which reconnects at least every 2 s — and a pass is asked for the moment the node answers (or a
 * leftover is seen gone). Nothing is written while the node stays silent.
 *
 * One watch per cluster, over the leftovers its last pass left. It ends once it has asked for its
 * pass, when the entry holds no unreachable leftover any more (stopped, or the cluster forgotten:
 * the pass after it finds no entry), and when the daemon stops.
 */
import { monitorCluster, type ClusterMonitor } from "../../health/index.js";
import type { LedgerEntry, LedgerProcess } from "../../launch/index.js";
import type { NodeAccess } from "../../nodes/index.js";
import type { MonitorTuning } from "../world.js";

export interface LeftoverWatchOptions {
  /** Ask for a pass of a cluster (the daemon's work queue). */
  requeue: (name: string) => void;
  /** The health monitor's timings (tests shorten them); only the poll interval and probe deadline apply. */
  monitor?: MonitorTuning;
}

interface Watch {
  /** The leftovers watched, as `node:pid:startTime:settings`, in ledger order. */
  leftovers: string;
  monitor: ClusterMonitor;
  /** A node answered (or a leftover was seen gone) and the pass was asked for. */
  answered: boolean;
}

export class LeftoverWatches {
  private readonly watches = new Map<string, Watch>();
  private stopped = false;

  constructor(private readonly options: LeftoverWatchOptions) {}

  /**
   * After a pass of `name`: watch the nodes of the unreachable leftovers `entry` holds (its ledger
   * entry, undefined when it has none), or stop watching when it holds none. The same leftovers
   * keep their watch. A node that answered the last watch of the same leftovers while the pass still
   * could not stop them must be seen silent again first, so a node that answers but fails its
   * teardown costs one extra pass, never a pass a second.
   */
  async follow(name: string, entry: LedgerEntry | undefined, nodeFor: (node: string) => NodeAccess, nodeSettings: (node: string) => unknown): Promise<void> {
    const leftovers = unreachableLeftovers(entry, nodeFor);
    // The nodes' settings are part of the key: a node whose address was corrected gets a watch over
    // the new node access (the pool closes the old one).
    const key = leftovers.map((p) => `${p.node}:${p.pid}:${p.startTime}:${JSON.stringify(nodeSettings(p.node) ?? null)}`).join(",");
    const previous = this.watches.get(name);
    if (previous !== undefined && previous.leftovers === key && !previous.answered) return;
    await this.stop(name);
    if (leftovers.length === 0 || this.stopped) return;
    const answeredBefore = previous?.leftovers === key && previous.answered;
    this.start(name, entry!, leftovers, key, answeredBefore ? [] : [...new Set(leftovers.map((p) => p.node))], nodeFor);
  }

  /** Stop watching `name`'s leftovers; resolves once no probe of the watch is in flight. */
  async stop(name: string): Promise<void> {
    const watch = this.watches.get(name);
    this.watches.delete(name);
    await watch?.monitor.stop();
  }

  /** Stop every watch, for good (the daemon stops): a pass ending later starts none. */
  async stopAll(): Promise<void> {
    this.stopped = true;
    await Promise.all([...this.watches.keys()].map((name) => this.stop(name)));
  }

  private start(name: string, entry: LedgerEntry, leftovers: LedgerProcess[], key: string, silentAtStart: string[], nodeFor: (node: string) => NodeAccess): void {
    const tuning = this.options.monitor ?? {};
    const answer = (): void => {
      if (watch.answered) return;
      watch.answered = true;
      void watch.monitor.stop();
      this.options.requeue(name);
    };
    // Liveness loops only: no ports and no coordinator URL to probe, no exit watches (a watch's own
    // connection to a silent node would be one more to give up on).
    const monitor = monitorCluster(
      { cluster: entry.cluster, processes: leftovers, ports: [], ...(entry.engine === undefined ? {} : { engine: entry.engine }) },
      {
        nodeFor,
        exitWatch: false,
        silentAtStart,
        ...(tuning.pollIntervalMs === undefined ? {} : { pollIntervalMs: tuning.pollIntervalMs }),
        ...(tuning.probeTimeoutMs === undefined ? {} : { probeTimeoutMs: tuning.probeTimeoutMs }),
        ...(tuning.strikes === undefined ? {} : { strikes: tuning.strikes }),
        onObservable: answer,
        onDeath: answer,
      },
    );
    const watch: Watch = { leftovers: key, monitor, answered: false };
    this.watches.set(name, watch);
  }
}

/** The leftovers of a teardown whose node did not answer, on nodes still in the settings. */
function unreachableLeftovers(entry: LedgerEntry | undefined, nodeFor: (node: string) => NodeAccess): LedgerProcess[] {
  if (entry?.phase !== "tearing-down") return [];
  return entry.processes.filter((p) => p.unreachable === true && isKnown(p.node, nodeFor));
}

/** A node removed from the settings cannot be asked: its leftovers wait for it to be added back. */
function isKnown(node: string, nodeFor: (node: string) => NodeAccess): boolean {
  try {
    nodeFor(node);
    return true;
  } catch {
    return false;
  }
}
