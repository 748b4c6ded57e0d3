/** describeLaunchProgress: Ready's words while a launch runs, from its timeline so far. */
import { describe, expect, it } from "vitest";
import { describeLaunchProgress } from "../../src/launch-timeline/index.js";

const at = "2026-12-04T00:00:00.000Z";
const steps = (...names: string[]) => names.map((step) => ({ at, step }));

/** An engine with a coordinator process to start once the stages listen (shard-engine, mlxcel), and one whose ranks form a ring (mlx-lm). */
const coordinator = { ring: false };
const ring = { ring: true };

describe("describeLaunchProgress", () => {
  it("follows the launch step by step", () => {
    expect(describeLaunchProgress([], 2, coordinator)).toBe("its processes are starting");
    expect(describeLaunchProgress(steps("launch-started", "ports-allocated", "stage-0-started"), 2, coordinator)).toBe("its processes are starting");
    expect(describeLaunchProgress(steps("launch-started", "stage-0-started", "stage-0-listening", "stage-1-started"), 2, coordinator)).toBe(
      "its processes are starting: 1 of 2 stages listen",
    );
    // Every stage listens, and no coordinator process is started (an engine whose ranks form a ring): since when.
    expect(describeLaunchProgress(steps("launch-started", "stage-0-listening", "stage-1-listening"), 2, ring)).toBe(
      "its 2 stages listen (all since 00:00:00 UTC); nothing answers /health yet (ranks that form a ring answer once every rank has joined it)",
    );
    // With a coordinator to start next, no word of rings.
    expect(describeLaunchProgress(steps("launch-started", "stage-0-listening", "stage-1-listening"), 2, coordinator)).toBe(
      "its processes are starting: 2 of 2 stages listen",
    );
    expect(describeLaunchProgress(steps("stage-0-listening", "stage-1-listening", "coordinator-started"), 2, coordinator)).toBe(
      "its 2 stages listen; its coordinator is starting",
    );
    expect(describeLaunchProgress(steps("stage-0-listening", "coordinator-started"), 1, coordinator)).toBe("its stage listens; its coordinator is starting");
    expect(describeLaunchProgress(steps("coordinator-started", "coordinator-healthy"), 2, coordinator)).toBe(
      "its coordinator answers /health; its first token is awaited",
    );
    expect(describeLaunchProgress(steps("coordinator-healthy", "readiness-probe-passed"), 2, coordinator)).toBe("it generates; it is being registered with the router");
    expect(describeLaunchProgress(steps("readiness-probe-passed", "router-registered", "ready"), 2, coordinator)).toBe("its launch is complete");
  });

  it("quotes an odd /health answer of the coordinator while the launch waits on it, and only that launch's", () => {
    const answered = [...steps("stage-0-listening", "coordinator-started"), { at, step: "coordinator-answered", detail: 'answered 500: {"error":"boom"}' }];
    expect(describeLaunchProgress(answered, 1, coordinator)).toBe('its stage listens; its coordinator is starting; its /health answered 500: {"error":"boom"}');
    expect(describeLaunchProgress([...answered, ...steps("launch-started", "stage-0-listening", "coordinator-started")], 1, coordinator)).toBe(
      "its stage listens; its coordinator is starting",
    );
  });

  it("says which members are stopped while the launch waits on them, until they resume", () => {
    const paused = steps("stage-0-listening", "stage-1-started", "stage-1-paused");
    expect(describeLaunchProgress(paused, 2, coordinator)).toBe(
      "its processes are starting: 1 of 2 stages listen; stage-1 is stopped, which holds the launch (see its timeline)",
    );
    expect(describeLaunchProgress([...paused, ...steps("stage-1-resumed")], 2, coordinator)).toBe("its processes are starting: 1 of 2 stages listen");
    expect(describeLaunchProgress(steps("coordinator-healthy", "stage-0-paused", "coordinator-paused"), 2, coordinator)).toBe(
      "its coordinator answers /health; its first token is awaited; stage-0, coordinator are stopped, which holds the launch (see its timeline)",
    );
  });

  it("says a stage whose address is silent (the path may be cut) while the launch waits on it, until it listens", () => {
    const detail =
      "its transport address 10.0.0.2:39600 does not answer from n1 (no answer, not a refusal, 2 probes of 1 s in a row): the path from n1 to n2 may be down or blocked; waiting until the deadline";
    const silent = [...steps("stage-0-listening", "stage-1-started"), { at, step: "stage-1-silent", detail }];
    expect(describeLaunchProgress(silent, 2, coordinator)).toBe(`its processes are starting: 1 of 2 stages listen; stage-1 runs, but ${detail}`);
    expect(describeLaunchProgress([...silent, ...steps("stage-1-listening", "coordinator-started")], 2, coordinator)).toBe(
      "its 2 stages listen; its coordinator is starting",
    );
    // Answering again (refused: the path is back, the port not yet bound) unsays the silence.
    expect(describeLaunchProgress([...silent, ...steps("stage-1-reached")], 2, coordinator)).toBe("its processes are starting: 1 of 2 stages listen");
  });

  it("says a failed or called-off launch is being torn down, not that it goes on", () => {
    const failed = [
      ...steps("stage-0-listening", "coordinator-healthy"),
      { at, step: "launch-failed", detail: "GenerationHung at readiness-probe: no token in 30 s\nmore" },
    ];
    expect(describeLaunchProgress([...failed, ...steps("stage-0-killing")], 2, coordinator)).toBe(
      "its launch failed (GenerationHung at readiness-probe: no token in 30 s), and what it started is being torn down",
    );
    expect(describeLaunchProgress(steps("stage-0-started", "launch-called-off"), 2, coordinator)).toBe(
      "its launch was called off, and what it started is being torn down",
    );
  });
});
