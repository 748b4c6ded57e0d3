/**
 * What a pass that keeps a running cluster (adopting it on a resync, or at the end of its launch)
 * says, from what its probes saw: a table, as the decision's. Ready stands only while nothing the
 * probes found says the cluster cannot serve; the runtime conditions say what was found; and a
 * death the health monitor recorded while the pass probed is never written over.
 */
import { describe, expect, it } from "vitest";
import type { ClusterObservation, CoordinatorHealth, TransportState } from "../../src/health/index.js";
import type { LedgerEntry } from "../../src/launch/index.js";
import { createMemory } from "../../src/reconciler/cluster-memory.js";
import { clearRuntime, markRunning, onRevision, recheckUnlessHealthy, setConditions } from "../../src/reconciler/verdicts.js";

const revision = "a".repeat(64);
const url = "http://127.0.0.1:8090";

const entry: LedgerEntry = {
  cluster: "tiny",
  revision,
  phase: "running",
  startedAt: "2026-12-01T10:00:00.000Z",
  processes: [0, 1].map((index) => ({
    role: "stage" as const,
    index,
    node: `n${index + 1}`,
    pid: 100 + index,
    startTime: "1",
    runDir: "/run",
    logFile: "/run/log",
    exitFile: "/run/exit",
  })),
  ports: [],
  coordinatorUrl: url,
};

function observation(transports: [TransportState, TransportState], coordinator: CoordinatorHealth, health: ClusterObservation["health"]): ClusterObservation {
  return {
    cluster: "tiny",
    at: "2026-12-01T10:00:05.000Z",
    health,
    stages: transports.map((transport, index) => ({
      index,
      node: `n${index + 1}`,
      layers: [index * 2, index * 2 + 2],
      address: `127.0.0.${index + 2}:5000`,
      pid: 100 + index,
      alive: true,
      transport,
    })),
    coordinator: { node: "local", url, health: coordinator },
    problems: [],
    gone: [],
  };
}

const conditions = (memory: ReturnType<typeof createMemory>): Record<string, [string, string]> =>
  Object.fromEntries(memory.conditions.map((c) => [c.type, [c.status, c.reason]]));

describe("markRunning: the conditions of a running cluster, from what the pass probed", () => {
  const rows: Array<{
    name: string;
    /** This daemon has seen the launch serve (its own launch, or an earlier pass whose probes all answered). */
    servingSeen?: boolean;
    seen: ClusterObservation | undefined;
    health: string;
    ready: [string, string];
    stages: [string, string];
    coordinator: [string, string];
  }> = [
    {
      name: "no observation",
      seen: undefined,
      health: "Healthy",
      ready: ["True", "ClusterReady"],
      stages: ["True", "AllStagesListening"],
      coordinator: ["True", "HealthOk"],
    },
    {
      name: "everything answers",
      seen: observation(["listening", "listening"], "ok", "Healthy"),
      health: "Healthy",
      ready: ["True", "ClusterReady"],
      stages: ["True", "AllStagesListening"],
      coordinator: ["True", "HealthOk"],
    },
    {
      name: "a transport probe without an answer, on a launch seen serving (doubtful: Ready stands)",
      servingSeen: true,
      seen: observation(["listening", "unknown"], "ok", "Degraded"),
      health: "Degraded",
      ready: ["True", "ClusterReady"],
      stages: ["Unknown", "ProbeUnanswered"],
      coordinator: ["True", "HealthOk"],
    },
    {
      name: "/health without an answer, on a launch seen serving (doubtful: Ready stands)",
      servingSeen: true,
      seen: observation(["listening", "listening"], "unknown", "Degraded"),
      health: "Degraded",
      ready: ["True", "ClusterReady"],
      stages: ["True", "AllStagesListening"],
      coordinator: ["Unknown", "ProbeUnanswered"],
    },
    {
      name: "/health without an answer, on a launch found running and not yet seen serving (a frozen coordinator at a restart)",
      seen: observation(["listening", "listening"], "unknown", "Degraded"),
      health: "Degraded",
      ready: ["Unknown", "ProbeUnanswered"],
      stages: ["True", "AllStagesListening"],
      coordinator: ["Unknown", "ProbeUnanswered"],
    },
    {
      name: "a transport probe without an answer, on a launch not yet seen serving",
      seen: observation(["unknown", "listening"], "ok", "Degraded"),
      health: "Degraded",
      ready: ["Unknown", "ProbeUnanswered"],
      stages: ["Unknown", "ProbeUnanswered"],
      coordinator: ["True", "HealthOk"],
    },
    {
      name: "/health answering 503 (a broken pipeline, a stopped stage)",
      seen: observation(["listening", "listening"], "loading", "Degraded"),
      health: "Unhealthy",
      ready: ["False", "CoordinatorUnhealthy"],
      stages: ["True", "AllStagesListening"],
      coordinator: ["False", "CoordinatorUnhealthy"],
    },
    {
      name: "a stage's port refused",
      seen: observation(["closed", "listening"], "ok", "Unhealthy"),
      health: "Unhealthy",
      ready: ["False", "StagePortClosed"],
      stages: ["False", "StagePortClosed"],
      coordinator: ["True", "HealthOk"],
    },
  ];
  for (const row of rows) {
    it(row.name, () => {
      const memory = createMemory("tiny");
      if (row.servingSeen === true) memory.servingSeen = { launch: entry.startedAt, since: Date.now() };
      expect(markRunning(memory, revision, entry, row.seen)).toBe(row.health);
      const c = conditions(memory);
      expect(c.Ready).toEqual(row.ready);
      expect(c.StagesListening).toEqual(row.stages);
      expect(c.CoordinatorHealthy).toEqual(row.coordinator);
      expect(c.Reconciling).toEqual(["False", "Converged"]);
    });
  }

  it("a launch found running is Ready once every probe has answered, and stays Ready through a later unanswered probe", () => {
    const memory = createMemory("tiny");
    markRunning(memory, revision, entry, observation(["listening", "listening"], "unknown", "Degraded"));
    expect(conditions(memory).Ready).toEqual(["Unknown", "ProbeUnanswered"]);
    expect(memory.conditions.find((c) => c.type === "Ready")!.message).toBe(
      `found running, not yet seen serving: ${url}/health did not answer within the probe's deadline`,
    );
    markRunning(memory, revision, entry, observation(["listening", "listening"], "unknown", "Degraded"));
    expect(conditions(memory).Ready).toEqual(["Unknown", "ProbeUnanswered"]);
    markRunning(memory, revision, entry, observation(["listening", "listening"], "ok", "Healthy"));
    expect(conditions(memory).Ready).toEqual(["True", "ClusterReady"]);
    markRunning(memory, revision, entry, observation(["listening", "listening"], "unknown", "Degraded"));
    expect(conditions(memory).Ready).toEqual(["True", "ClusterReady"]);
    // Another launch of the cluster has to show it serves again.
    markRunning(memory, revision, { ...entry, startedAt: "2026-12-01T10:01:00.000Z" }, observation(["listening", "listening"], "unknown", "Degraded"));
    expect(conditions(memory).Ready).toEqual(["Unknown", "ProbeUnanswered"]);
  });

  it("a transport probe without an answer names the node it is probed from, whose own silence leaves it unanswered too", () => {
    const memory = createMemory("tiny");
    const withCoordinator: LedgerEntry = {
      ...entry,
      processes: [...entry.processes, { role: "coordinator", node: "n3", pid: 300, startTime: "1", runDir: "/run", logFile: "/run/log", exitFile: "/run/exit" }],
    };
    markRunning(memory, revision, withCoordinator, observation(["unknown", "unknown"], "ok", "Degraded"));
    expect(memory.conditions.find((c) => c.type === "StagesListening")!.message).toBe(
      "stage-0 on n1: transport 127.0.0.2:5000 did not answer within the probe's deadline; stage-1 on n2: transport 127.0.0.3:5000 did not answer within the probe's deadline (probed from n3, which may itself not answer)",
    );
  });

  it("a stage process seen gone: StagesListening False StageDied, Ready withdrawn", () => {
    const memory = createMemory("tiny");
    const seen = observation(["listening", "listening"], "ok", "Unhealthy");
    seen.stages[1] = { ...seen.stages[1]!, alive: false, liveness: "gone" };
    expect(markRunning(memory, revision, entry, seen)).toBe("Unhealthy");
    expect(conditions(memory).StagesListening).toEqual(["False", "StageDied"]);
    expect(conditions(memory).Ready).toEqual(["False", "StageDied"]);
  });

  it("says what was found, and that the monitor ends it if it lasts", () => {
    const memory = createMemory("tiny");
    markRunning(memory, revision, entry, observation(["closed", "listening"], "down", "Unhealthy"));
    const ready = memory.conditions.find((c) => c.type === "Ready")!;
    expect(ready.message).toBe(`stage-0 on n1: transport 127.0.0.2:5000 refused; ${url}/health is down: torn down and relaunched if it lasts`);
  });

  it("a death recorded while the pass probed stands: nothing is written over it", () => {
    const memory = createMemory("tiny");
    markRunning(memory, revision, entry, observation(["listening", "listening"], "ok", "Healthy"));
    // What recording a death leaves (record-death.ts): this launch marked, Ready withdrawn.
    memory.deathRecordedFor = entry.startedAt;
    setConditions(memory, revision, { Ready: { status: "False", reason: "StageDied", message: "stage-1 on n2: pid 101 is no longer running" } });
    const before = JSON.stringify(memory.conditions);
    expect(markRunning(memory, revision, entry, observation(["listening", "listening"], "ok", "Healthy"))).toBeUndefined();
    expect(JSON.stringify(memory.conditions)).toBe(before);
    // Another launch of the cluster is not this death's.
    expect(markRunning(memory, revision, { ...entry, startedAt: "2026-12-01T10:01:00.000Z" })).toBe("Healthy");
  });
});

describe("recheckUnlessHealthy: how soon a running cluster that did not look Healthy is looked at again", () => {
  it("5 s, then twice as long each time it still does not, at most a minute; from 5 s again once Healthy", () => {
    const memory = createMemory("tiny");
    const waits = ["Degraded", "Degraded", "Unhealthy", "Degraded", "Degraded", "Degraded"].map((h) => recheckUnlessHealthy(memory, h as "Degraded"));
    expect(waits).toEqual([5_000, 10_000, 20_000, 40_000, 60_000, 60_000].map((afterMs) => ({ kind: "requeue", afterMs })));
    expect(recheckUnlessHealthy(memory, "Healthy")).toEqual({ kind: "done" });
    expect(recheckUnlessHealthy(memory, "Degraded")).toEqual({ kind: "requeue", afterMs: 5_000 });
  });

  it("from 5 s again for a new launch or a new revision, whatever the old one had reached", () => {
    const memory = createMemory("tiny");
    for (let i = 0; i < 5; i++) recheckUnlessHealthy(memory, "Degraded");
    clearRuntime(memory, revision);
    expect(recheckUnlessHealthy(memory, "Degraded")).toEqual({ kind: "requeue", afterMs: 5_000 });
    for (let i = 0; i < 5; i++) recheckUnlessHealthy(memory, "Degraded");
    onRevision(memory, "b".repeat(64));
    expect(recheckUnlessHealthy(memory, "Degraded")).toEqual({ kind: "requeue", afterMs: 5_000 });
  });
});
