/**
 * A pass that failed because a node did not answer (NodeUnreachable: a partition, a hung sshd,
 * while probing, staging or launching) is retried with back-off, up to 60 s apart: once the node is
 * back, up to a minute of outage for nothing. Its cluster's nodes are asked instead — one `true`
 * over the pool's connection every `pollMs` (1000 ms), each within that — and a pass is asked for the
 * moment a node that missed two rounds in a row answers. Nothing is written meanwhile. (Leftovers of
 * a teardown a node did not answer have their own watch, leftovers/watch-leftovers.ts.)
 *
 * One watch per cluster, over the nodes its definition uses. It ends once it has asked for its
 * pass, when a pass of the cluster ends otherwise than so, and when the daemon stops.
 */
import { setTimeout as delay } from "node:timers/promises";
import { within, type NodeAccess } from "../nodes/index.js";

export interface ReturningNodesOptions {
  /** Ask for a pass of a cluster (the daemon's work queue). */
  requeue: (name: string) => void;
  /** How often each node is asked, and each question's deadline, ms. Default 1000. */
  pollMs?: number;
}

/** Rounds in a row a node must miss before its answer counts as its return. */
const silentRounds = 2;

interface Watch {
  /** The nodes watched, by name, in order: the same nodes keep their watch. */
  key: string;
  stop: AbortController;
}

export class ReturningNodes {
  private readonly watches = new Map<string, Watch>();
  private stopped = false;

  constructor(private readonly options: ReturningNodesOptions) {}

  /** After a pass of `name`: watch `nodes` when the pass failed on a node that did not answer (`unreachable`), else stop watching. */
  follow(name: string, unreachable: boolean, nodes: readonly NodeAccess[]): void {
    const key = nodes.map((n) => n.config.name).join(",");
    const previous = this.watches.get(name);
    if (unreachable && previous?.key === key) return;
    this.stop(name);
    if (!unreachable || nodes.length === 0 || this.stopped) return;
    const stop = new AbortController();
    this.watches.set(name, { key, stop });
    const returned = (): void => {
      if (stop.signal.aborted) return;
      this.stop(name);
      this.options.requeue(name);
    };
    for (const node of nodes) void this.watchNode(node, stop.signal, returned);
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

  private async watchNode(node: NodeAccess, signal: AbortSignal, returned: () => void): Promise<void> {
    const pollMs = this.options.pollMs ?? 1_000;
    let missed = 0;
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
