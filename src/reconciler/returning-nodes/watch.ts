/**
 * Passes that failed for want of a node's answer are retried with back-off, up to 60 s apart, and
 * each retry rewrites the status file: once the node is back, up to a minute of outage (or of a
 * leftover still running) for nothing, and retrying faster is no answer. So the nodes are watched
 * instead — one `true` over the pool's connection every `pollMs` (1000 ms), each within that — and
 * a pass is asked for the moment a node counted silent answers. Nothing is written meanwhile.
 *
 * A node counts as silent from the start when the pass found it so (what a teardown could not
 * reach: its leftovers), or once it has missed two rounds in a row (a pass that failed as
 * NodeUnreachable on one of several nodes: those that answer all along must not ask for a pass a
 * second). One watch per cluster; the same watch (by its key) keeps running across passes. It ends
 * once it has asked for its pass, when a pass leaves nothing to watch, and when the daemon stops.
 */
import { setTimeout as delay } from "node:timers/promises";
import { within, type NodeAccess } from "../../nodes/index.js";

/** What to watch after a pass; see whatToWatch. */
export interface NodeWatch {
  /** Names the watch: the same key keeps a running watch, and says whether it answered before. */
  key: string;
  /** The nodes to ask, each once. */
  nodes: readonly NodeAccess[];
  /** Nodes the pass found silent: their first answer counts as their return. */
  silentAtStart: readonly string[];
}

export interface ReturningNodesOptions {
  /** Ask for a pass of a cluster (the daemon's work queue). */
  requeue: (name: string) => void;
  /** How often each node is asked, and each question's deadline, ms. Default 1000. */
  pollMs?: number;
}

/** Rounds in a row a node must miss before its answer counts as its return. */
const silentRounds = 2;

interface Watch {
  key: string;
  stop: AbortController;
  /** It asked for its pass: a node returned. */
  answered: boolean;
}

export class ReturningNodes {
  private readonly watches = new Map<string, Watch>();
  private stopped = false;

  constructor(private readonly options: ReturningNodesOptions) {}

  /**
   * After a pass of `name`: watch what it left to watch, or stop watching when nothing (undefined).
   * A watch of the same key runs on. One of the same key that answered while the pass that followed
   * still could not reach the node starts with no node silent: a node that answers `true` but fails
   * the pass's own work costs one extra pass once it is seen silent again, never a pass a second.
   */
  follow(name: string, watch: NodeWatch | undefined): void {
    const previous = this.watches.get(name);
    if (watch !== undefined && previous?.key === watch.key && !previous.answered) return;
    this.stop(name);
    if (watch === undefined || watch.nodes.length === 0 || this.stopped) return;
    const answeredBefore = previous?.key === watch.key && previous.answered;
    const running: Watch = { key: watch.key, stop: new AbortController(), answered: false };
    // Kept after it answers (stopped), to be told apart from a new watch at the next pass.
    this.watches.set(name, running);
    const returned = (): void => {
      if (running.stop.signal.aborted) return;
      running.answered = true;
      running.stop.abort();
      this.options.requeue(name);
    };
    const silent = new Set(answeredBefore ? [] : watch.silentAtStart);
    for (const node of watch.nodes) void this.watchNode(node, silent.has(node.config.name), running.stop.signal, returned);
  }

  /** Stop watching `name`'s nodes. */
  stop(name: string): void {
    this.watches.get(name)?.stop.abort();
    this.watches.delete(name);
  }

  /** Stop every watch, for good (the daemon stops): a pass ending later starts none. */
  stopAll(): void {
    this.stopped = true;
    for (const name of [...this.watches.keys()]) this.stop(name);
  }

  private async watchNode(node: NodeAccess, silentAtStart: boolean, signal: AbortSignal, returned: () => void): Promise<void> {
    const pollMs = this.options.pollMs ?? 1_000;
    let missed = silentAtStart ? silentRounds : 0;
    while (!signal.aborted) {
      const answered = await within(
        pollMs,
        node.run(["true"], { deadlineMs: pollMs }).then(
          (r) => r.exitCode === 0,
          () => false,
        ),
        false,
      );
      if (signal.aborted) return;
      if (answered && missed >= silentRounds) return returned();
      missed = answered ? 0 : missed + 1;
      await delay(pollMs, undefined, { signal }).catch(() => undefined);
    }
  }
}
