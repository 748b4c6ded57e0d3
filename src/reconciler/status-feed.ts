/**
 * The daemon's live view of its clusters: every status the reconciler composes — each status file
 * write, staging progress, a death the moment it is seen — and every cluster it forgets, as events.
 * The dashboard streams them; the status files stay the record — and when a file cannot be
 * written, the feed says so too (the dashboard would otherwise show a fresher status than the one
 * `shardctl status` and CI read, without a word). Listeners run synchronously inside the writer, so
 * they must only queue work (the dashboard serialises once and writes to sockets).
 */
import { EventEmitter } from "node:events";
import type { ClusterStatus } from "./status/index.js";

/** Why a cluster's status file is behind the status last published. */
export interface StatusFileFailure {
  reason: "StatusWriteFailed";
  message: string;
  /** When the write failed (RFC 3339). */
  at: string;
}

export interface StatusFeedEvents {
  status: [status: ClusterStatus];
  removed: [cluster: string];
  /** The cluster's status file could not be written (a failure), or is written again (undefined). */
  file: [cluster: string, failure: StatusFileFailure | undefined];
  /** A launch of the cluster lost a process (recorded once per launch), for the reason its record first gave. */
  death: [cluster: string, reason: string];
}

export class StatusFeed extends EventEmitter<StatusFeedEvents> {
  private readonly latest = new Map<string, ClusterStatus>();
  private readonly fileFailures = new Map<string, StatusFileFailure>();

  /** A status was composed (and is being written): the freshest word on its cluster. */
  publish(status: ClusterStatus): void {
    this.latest.set(status.cluster, status);
    this.emit("status", status);
  }

  /** A launch of `cluster` lost a process: said once per launch, as the death is recorded. */
  deathRecorded(cluster: string, reason: string): void {
    this.emit("death", cluster, reason);
  }

  /** The cluster was pruned: its status file is gone. */
  remove(cluster: string): void {
    this.latest.delete(cluster);
    this.fileFailures.delete(cluster);
    this.emit("removed", cluster);
  }

  /**
   * How the last write of the cluster's status file went: a failure, or undefined once one succeeds
   * (said once). A failure the same as the one before is not said again: a file that stays
   * unwritable fails at every write (many a second while a cluster changes), and its `at` stays
   * when it began to be behind.
   */
  fileWritten(cluster: string, failure: StatusFileFailure | undefined): void {
    if (failure === undefined && !this.fileFailures.has(cluster)) return;
    if (failure !== undefined && this.fileFailures.get(cluster)?.message === failure.message) return;
    if (failure === undefined) this.fileFailures.delete(cluster);
    else this.fileFailures.set(cluster, failure);
    this.emit("file", cluster, failure);
  }

  /** The clusters whose status file is behind, and why. */
  failedFiles(): Map<string, StatusFileFailure> {
    return new Map(this.fileFailures);
  }

  /** The last status published for each cluster since the daemon started, by name. */
  snapshot(): ClusterStatus[] {
    return [...this.latest.values()].sort((a, b) => a.cluster.localeCompare(b.cluster, "en", { numeric: true }));
  }
}
