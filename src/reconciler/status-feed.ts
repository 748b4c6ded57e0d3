/**
 * The daemon's live view of its clusters: every status the reconciler composes — each status file
 * write, staging progress, a death the moment it is seen — and every cluster it forgets, as events.
 * The dashboard streams them; the status files stay the record. Listeners run synchronously inside
 * the writer, so they must only queue work (the dashboard serialises once and writes to sockets).
 */
import { EventEmitter } from "node:events";
import type { ClusterStatus } from "./status/index.js";

export interface StatusFeedEvents {
  status: [status: ClusterStatus];
  removed: [cluster: string];
}

export class StatusFeed extends EventEmitter<StatusFeedEvents> {
  private readonly latest = new Map<string, ClusterStatus>();

  /** A status was composed (and is being written): the freshest word on its cluster. */
  publish(status: ClusterStatus): void {
    this.latest.set(status.cluster, status);
    this.emit("status", status);
  }

  /** The cluster was pruned: its status file is gone. */
  remove(cluster: string): void {
    this.latest.delete(cluster);
    this.emit("removed", cluster);
  }

  /** The last status published for each cluster since the daemon started, by name. */
  snapshot(): ClusterStatus[] {
    return [...this.latest.values()].sort((a, b) => a.cluster.localeCompare(b.cluster));
  }
}
