import type { WatchedCluster, WatchedPort, WatchedProcess } from "./types.js";
import { joinHostPort } from "../nodes/index.js";

/** `stage-0`, `coordinator`: the same labels launch uses in its timeline and file names. */
export function labelOf(process: WatchedProcess): string {
  return process.role === "stage" ? `stage-${process.index ?? 0}` : "coordinator";
}

/** Stage processes in pipeline order. */
export function stagesOf(cluster: WatchedCluster): WatchedProcess[] {
  return cluster.processes.filter((p) => p.role === "stage").sort((a, b) => (a.index ?? 0) - (b.index ?? 0));
}

export function coordinatorOf(cluster: WatchedCluster): WatchedProcess | undefined {
  return cluster.processes.find((p) => p.role === "coordinator");
}

/**
 * The process that serves the cluster's HTTP API: the coordinator, or — for an engine whose last
 * stage serves it (mlx-lm's rank 0) — the stage of the last layers.
 */
export function httpServerOf(cluster: WatchedCluster, httpServer: "coordinator" | "last-stage"): WatchedProcess | undefined {
  return httpServer === "coordinator" ? coordinatorOf(cluster) : stagesOf(cluster).at(-1);
}

/**
 * The transport port of a stage: launch records one transport port per stage, in stage order, so
 * the n-th transport port belongs to the stage of index n.
 */
export function transportPortOf(cluster: WatchedCluster, index: number): WatchedPort | undefined {
  return cluster.ports.filter((p) => p.purpose === "transport")[index];
}

/** The node that probes transport ports: the coordinator's, since that is who must reach them. */
export function proberNodeName(cluster: WatchedCluster): string | undefined {
  return coordinatorOf(cluster)?.node ?? cluster.ports.find((p) => p.purpose === "http")?.node;
}

export function addressOf(port: WatchedPort): string {
  return joinHostPort(port.host, port.port);
}
