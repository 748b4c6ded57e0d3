/**
 * One look at a running cluster: per stage, process liveness and transport port state (probed from
 * the coordinator's node); the coordinator's liveness and `/health`; an aggregate health. Level-
 * triggered: it trusts nothing but the ledger's pids and start times and what the probes say now.
 */
import { defaultEngineKind, engineOf } from "../engines/index.js";
import { aggregateHealth } from "./aggregate-health.js";
import { addressOf, coordinatorOf, httpServerOf, labelOf, proberNodeName, stagesOf, transportPortOf } from "./labels.js";
import {
  defaultProbeTimeoutMs,
  readinessOf,
  probeCoordinatorHealth,
  type CoordinatorAnswer,
  type LivenessProbe,
  healthInWords,
  probeLiveness,
  probeTransport,
  shouldProbeTransport,
  slowPathTimeoutMs,
} from "./probes.js";
import type { ClusterObservation, CoordinatorCard, HealthDeps, StageCard, TransportState, WatchedCluster, WatchedProcess } from "./types.js";

export interface ObserveOptions extends HealthDeps {
  /** The previous observation: a card whose state did not change keeps its `since`. */
  previous?: ClusterObservation;
  /**
   * Members already seen gone (`stage-1`, `coordinator`): a process seen gone never comes back, so
   * they are not asked again — a node slow to answer would draw them in doubt, as if they might run.
   */
  knownGone?: ReadonlySet<string>;
  /**
   * Nodes the health monitor reports unobservable now: a liveness probe of theirs that goes
   * unanswered is not asked again with a longer deadline (their silence is known; the look would
   * wait seconds for nothing).
   */
  unanswering?: ReadonlySet<string>;
}

export async function observeCluster(cluster: WatchedCluster, options: ObserveOptions): Promise<ClusterObservation> {
  const at = new Date().toISOString();
  const timeoutMs = options.probeTimeoutMs ?? defaultProbeTimeoutMs;
  const readiness = readinessOf(cluster);
  const proberName = proberNodeName(cluster);
  const problems: string[] = [];
  const gone: string[] = [];
  const unknownLiveness = new Set<number>();

  // A member seen gone before is gone, without asking its node. One whose node does not answer
  // within the deadline is asked once more with room for a long round trip (see slowPathTimeoutMs),
  // unless its node is known silent or its connection dropped.
  const askLiveness = async (process: WatchedProcess): Promise<LivenessProbe> => {
    if (options.knownGone?.has(labelOf(process)) === true) return { state: "gone" };
    const node = options.nodeFor(process.node);
    const first = await probeLiveness(node, process, { deadlineMs: timeoutMs });
    if (first.state !== "unknown" || options.unanswering?.has(process.node) === true || node.connected === false) return first;
    return probeLiveness(node, process, { deadlineMs: slowPathTimeoutMs(timeoutMs) });
  };
  const rankOf = engineOf(cluster.engine ?? defaultEngineKind).rankOfStage;
  // The pipeline's stage count, for an engine whose ranks count from the other end: the plan's when
  // known, and never fewer than one past the last stage recorded — a launch cut short records only
  // the stages it started (stage-1 alone gave rank 1 - 1 - 1 = -1: a status file that could not be
  // written for a minute, its schema refusing the rank).
  const stageCount = Math.max(options.layers?.length ?? 0, ...stagesOf(cluster).map((s) => (s.index ?? 0) + 1));
  // Probe every stage at once: liveness on its node, transport from the coordinator's node.
  const stages = await Promise.all(
    stagesOf(cluster).map(async (process): Promise<StageCard> => {
      const index = process.index ?? 0;
      const label = labelOf(process);
      const port = transportPortOf(cluster, index);
      const [probe, transport] = await Promise.all([
        askLiveness(process),
        !shouldProbeTransport(cluster)
          ? Promise.resolve<TransportState>("not-probed")
          : port === undefined || proberName === undefined
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
      if (transport !== "listening" && transport !== "not-probed" && port !== undefined) problems.push(`${label} transport ${addressOf(port)} is ${transport}`);
      const before = options.previous?.stages.find((s) => s.index === index && s.pid === process.pid);
      // Without a plan of this launch (a new revision that cannot be planned while it still serves)
      // the process holds what its card said before: its layers did not change with the definition.
      const layers = options.layers?.[index] ?? before?.layers;
      const card: StageCard = {
        index,
        node: process.node,
        layers: layers === undefined ? [0, 0] : [layers[0], layers[1]],
        ...(port === undefined ? {} : { address: addressOf(port) }),
        pid: process.pid,
        ...(rankOf === undefined ? {} : { rank: rankOf(index, stageCount) }),
        alive: liveness === "alive",
        liveness,
        transport,
      };
      // Since when the process has been in its state: first seen, or its liveness or port changed.
      // A spell of not knowing (its node did not answer: liveness or transport unknown) is no
      // change of the process, and an SSH blink must not read as a restart.
      const blink = [card.liveness, before?.liveness, card.transport, before?.transport].includes("unknown");
      const unchanged = before !== undefined && (blink || (before.alive === card.alive && before.transport === card.transport));
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
    const [probe, answer] = await Promise.all([askLiveness(process), url === "" ? Promise.resolve(unasked) : probeCoordinatorHealth(url, readiness, timeoutMs)]);
    const liveness = probe.state;
    coordinatorLiveness = liveness;
    coordinator = cardOf(process.node, url, process.pid, answer);
    if (liveness === "gone") {
      gone.push("coordinator");
      problems.push(`coordinator (pid ${process.pid}) on ${process.node} is gone`);
    }
    if (liveness === "unknown") problems.push(`coordinator on ${process.node}: liveness unknown: ${probe.error ?? "no answer"}`);
    if (answer.health !== "ok") problems.push(`coordinator ${url}${readiness.healthPath} is ${healthInWords(answer)}`);
  } else if (readiness.httpServer === "last-stage") {
    // The stage of the last layers serves HTTP (its liveness is its stage card's): its /health alone.
    const server = httpServerOf(cluster, readiness.httpServer);
    const url = cluster.coordinatorUrl ?? "";
    if (server !== undefined) {
      const answer = url === "" ? unasked : await probeCoordinatorHealth(url, readiness, timeoutMs);
      coordinator = cardOf(server.node, url, server.pid, answer);
      const card = stages.find((s) => s.index === server.index);
      coordinatorLiveness = card?.alive === true ? "alive" : unknownLiveness.has(server.index ?? 0) ? "unknown" : "gone";
      if (answer.health !== "ok") problems.push(`${labelOf(server)} ${url}${readiness.healthPath} is ${healthInWords(answer)}`);
    }
  } else {
    problems.push("no coordinator is recorded");
  }
  if (stages.length === 0) problems.push("no stage is recorded");

  const health = aggregateHealth(stages, coordinator, unknownLiveness, coordinatorLiveness);
  return { cluster: cluster.cluster, at, health, stages, ...(coordinator === undefined ? {} : { coordinator }), problems, gone };
}

/** No URL to ask. */
const unasked: CoordinatorAnswer = { health: "unknown" };

function cardOf(node: string, url: string, pid: number | undefined, answer: CoordinatorAnswer): CoordinatorCard {
  return { node, url, ...(pid === undefined ? {} : { pid }), health: answer.health, ...(answer.said === undefined ? {} : { said: answer.said }) };
}
