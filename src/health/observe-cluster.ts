/**
 * One look at a running cluster: per stage, process liveness and transport port state (probed from
 * the coordinator's node); the coordinator's liveness and `/health`; an aggregate health. Level-
 * triggered: it trusts nothing but the ledger's pids and start times and what the probes say now.
 */
import { aggregateHealth } from "./aggregate-health.js";
import { addressOf, coordinatorOf, labelOf, proberNodeName, stagesOf, transportPortOf } from "./labels.js";
import { defaultProbeTimeoutMs, readinessOf, probeCoordinatorHealth, probeLiveness, probeTransport } from "./probes.js";
import type { ClusterObservation, CoordinatorCard, HealthDeps, StageCard, TransportState, WatchedCluster } from "./types.js";

export interface ObserveOptions extends HealthDeps {
  /** The previous observation: a card whose state did not change keeps its `since`. */
  previous?: ClusterObservation;
}

export async function observeCluster(cluster: WatchedCluster, options: ObserveOptions): Promise<ClusterObservation> {
  const at = new Date().toISOString();
  const timeoutMs = options.probeTimeoutMs ?? defaultProbeTimeoutMs;
  const readiness = readinessOf(cluster);
  const proberName = proberNodeName(cluster);
  const problems: string[] = [];
  const gone: string[] = [];
  const unknownLiveness = new Set<number>();

  // Probe every stage at once: liveness on its node, transport from the coordinator's node.
  const stages = await Promise.all(
    stagesOf(cluster).map(async (process): Promise<StageCard> => {
      const index = process.index ?? 0;
      const label = labelOf(process);
      const port = transportPortOf(cluster, index);
      const [probe, transport] = await Promise.all([
        probeLiveness(options.nodeFor(process.node), process),
        port === undefined || proberName === undefined
          ? Promise.resolve<TransportState>("unknown")
          : probeTransport(options.nodeFor(proberName), port.host, port.port, timeoutMs),
      ]);
      const liveness = probe.state;
      if (liveness === "unknown") {
        unknownLiveness.add(index);
        problems.push(`${label} on ${process.node}: liveness unknown: ${probe.error ?? "no answer"}`);
      } else if (liveness === "gone") {
        gone.push(label);
        problems.push(`${label} (pid ${process.pid}) on ${process.node} is gone`);
      }
      if (transport !== "listening" && port !== undefined) problems.push(`${label} transport ${addressOf(port)} is ${transport}`);
      const layers = options.layers?.[index];
      const card: StageCard = {
        index,
        node: process.node,
        layers: layers === undefined ? [0, 0] : [layers[0], layers[1]],
        ...(port === undefined ? {} : { address: addressOf(port) }),
        pid: process.pid,
        alive: liveness === "alive",
        transport,
      };
      const before = options.previous?.stages.find((s) => s.index === index && s.pid === process.pid);
      const unchanged = before !== undefined && before.alive === card.alive && before.transport === card.transport;
      card.since = unchanged && before.since !== undefined ? before.since : at;
      return card;
    }),
  );

  // The coordinator: its process and its /health.
  const process = coordinatorOf(cluster);
  let coordinator: CoordinatorCard | undefined;
  let coordinatorLiveness: "alive" | "gone" | "unknown" | undefined;
  if (process !== undefined) {
    const url = cluster.coordinatorUrl ?? "";
    const [probe, health] = await Promise.all([
      probeLiveness(options.nodeFor(process.node), process),
      url === "" ? Promise.resolve("unknown" as const) : probeCoordinatorHealth(url, readiness, timeoutMs),
    ]);
    const liveness = probe.state;
    coordinatorLiveness = liveness;
    coordinator = { node: process.node, url, pid: process.pid, health };
    if (liveness === "gone") {
      gone.push("coordinator");
      problems.push(`coordinator (pid ${process.pid}) on ${process.node} is gone`);
    }
    if (liveness === "unknown") problems.push(`coordinator on ${process.node}: liveness unknown: ${probe.error ?? "no answer"}`);
    if (health !== "ok") problems.push(`coordinator ${url}${readiness.healthPath} is ${health}`);
  } else {
    problems.push("no coordinator is recorded");
  }
  if (stages.length === 0) problems.push("no stage is recorded");

  const health = aggregateHealth(stages, coordinator, unknownLiveness, coordinatorLiveness);
  return { cluster: cluster.cluster, at, health, stages, ...(coordinator === undefined ? {} : { coordinator }), problems, gone };
}
