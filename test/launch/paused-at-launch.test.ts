/**
 * A process of a launch stopped (SIGSTOP) right after it was spawned: a stage that therefore never
 * listens, a coordinator that never answers /health. The launch still ends at its phase's deadline
 * and leaves nothing behind, and while it waits it says which process is stopped, what it waits
 * for and until when (a `…-paused` event, which the status file shows as it happens); the timeout
 * names the stopped process (also while the first token is awaited); a process continued while the
 * launch waits is said to run again and the launch goes on. Real processes on real sshd nodes; the
 * stand-in engine stops itself (`kill -STOP $$`) before it becomes the real shard-engine. Needs
 * `npm run build`.
 */
import { rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bundledShardEngineCommand, LaunchError, launchCluster, teardownCluster } from "../../src/launch/index.js";
import { makeContext, makeRequest, processesMentioning, startLifecycleWorld, type LifecycleWorld } from "./lifecycle-fixture.js";

let world: LifecycleWorld;

beforeAll(async () => {
  world = await startLifecycleWorld();
});
afterAll(async () => {
  await world?.close();
});

/** An engine binary whose process `nodeId` stops itself as soon as it starts, then runs shard-engine once continued. */
async function stoppingEngine(nodeId: string): Promise<string> {
  const path = join(world.root, "bin", `stops-${nodeId}.sh`);
  const engine = bundledShardEngineCommand.map((arg) => JSON.stringify(arg)).join(" ");
  await writeFile(path, `#!/bin/sh\ncase " $* " in *" --node-id ${nodeId} "*) kill -STOP $$ ;; esac\nexec ${engine} "$@"\n`, { mode: 0o755 });
  return path;
}

/** Launch and expect it to fail; the error and the events in order. */
async function failedLaunch(cluster: string, nodeId: string, deadlines: { stageListenMs?: number; coordinatorHealthMs?: number }) {
  const request = await makeRequest(world, { cluster, binary: await stoppingEngine(nodeId), deadlines });
  const context = makeContext(world);
  const error = await launchCluster(request, context).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(LaunchError);
  // All or nothing: the stopped process too is gone (TERM is followed by CONT), with everything else.
  expect(await processesMentioning(world, join(world.root, "run", cluster))).toEqual([]);
  expect(await world.ledger.read(cluster)).toBeUndefined();
  expect(await world.registrar.lookup(cluster)).toBeUndefined();
  return { failure: error as LaunchError, events: context.events };
}

describe("a launch process stopped right after it was spawned", () => {
  it("a stage: said paused while the launch waits for it to listen, named by the StageListenTimeout, and torn down", async () => {
    const { failure, events } = await failedLaunch("stage-stopped", "stage-1", { stageListenMs: 6_000 });
    const steps = events.map((e) => e.step);
    expect(failure.reason, failure.message).toBe("StageListenTimeout");
    expect(failure.step).toBe("stage-1-listen");
    // Said while the launch still waited: before the failure, not only in it.
    const paused = events.find((e) => e.step === "stage-1-paused");
    expect(paused, steps.join(" ")).toBeDefined();
    expect(steps.indexOf("stage-1-paused")).toBeLessThan(steps.indexOf("launch-failed"));
    // The stopped pid is the engine under the recorded wrapper (the stand-in stopped itself). What
    // the launch waits for is what it waited for when the stop was said: stage-0 may still be loading.
    const pid = /^stopped \(pid (\d+)/.exec(paused!.detail!)![1];
    expect(paused!.detail).toMatch(
      new RegExp(
        `^stopped \\(pid ${pid} in state T, a stop signal such as SIGSTOP\\) on node-2, 2 looks in a row since \\S+: the launch waits for stage-[01] to listen on \\S+ until \\S+Z, which cannot happen while it is stopped \\(kill -CONT ${pid} continues it\\); then everything started is torn down$`,
      ),
    );
    expect(failure.message).toMatch(
      new RegExp(
        `^stage-1 on node-2 did not listen on \\S+ within 6000 ms; stage-1 on node-2 is stopped \\(pid ${pid} in state T, a stop signal such as SIGSTOP\\) since \\S+$`,
      ),
    );
    expect(steps).not.toContain("stage-0-paused");
    expect(steps.at(-1)).toBe("torn-down");
  });

  it("the coordinator: said paused while the launch waits for /health, named by the CoordinatorHealthTimeout, and torn down", async () => {
    const { failure, events } = await failedLaunch("coordinator-stopped", "coordinator", { coordinatorHealthMs: 6_000 });
    const steps = events.map((e) => e.step);
    expect(failure.reason, failure.message).toBe("CoordinatorHealthTimeout");
    expect(steps.indexOf("coordinator-paused"), steps.join(" ")).toBeGreaterThan(steps.indexOf("coordinator-started"));
    expect(steps.indexOf("coordinator-paused")).toBeLessThan(steps.indexOf("launch-failed"));
    expect(events.find((e) => e.step === "coordinator-paused")!.detail).toMatch(
      /: the launch waits for http:\/\/\S+\/health to answer 200 until \S+Z, which cannot happen/,
    );
    expect(failure.message).toMatch(
      /\/health did not answer 200 within 6000 ms; it last (refused the connection: nothing listens there|did not answer within 2000 ms)( \(\d+ times in a row\))?; coordinator on node-1 is stopped \(pid \d+ in state T, a stop signal such as SIGSTOP\) since \S+$/,
    );
  });

  it("a stage continued while the launch waits: said to run again, and the launch goes on to ready", async () => {
    const request = await makeRequest(world, { cluster: "continued", binary: await stoppingEngine("stage-0"), deadlines: { stageListenMs: 30_000 } });
    const context = makeContext(world);
    const continued = (async () => {
      // Continue it once the launch has said it is paused.
      for (;;) {
        const paused = context.events.find((e) => e.step === "stage-0-paused");
        if (paused !== undefined) return process.kill(Number(/^stopped \(pid (\d+)/.exec(paused.detail!)![1]), "SIGCONT");
        if (context.events.some((e) => e.step === "launch-failed")) return;
        await new Promise((r) => setTimeout(r, 100));
      }
    })();
    const result = await launchCluster(request, context);
    await continued;
    const steps = result.timeline.map((e) => e.step);
    expect(steps.indexOf("stage-0-paused"), steps.join(" ")).toBeGreaterThan(-1);
    expect(steps.indexOf("stage-0-resumed")).toBeGreaterThan(steps.indexOf("stage-0-paused"));
    expect(steps.indexOf("stage-0-listening")).toBeGreaterThan(steps.indexOf("stage-0-paused"));
    expect(steps.at(-1)).toBe("ready");
    await teardownCluster((await world.ledger.read("continued"))!, { ledger: world.ledger, registrar: world.registrar, nodeFor: world.nodeFor, graceMs: 2_000 });
    expect(await processesMentioning(world, join(world.root, "run", "continued"))).toEqual([]);
    await rm(join(world.root, "bin", "stops-stage-0.sh"));
  });
});

// Regression: nothing looked for stopped processes while the first token was awaited, a wait that
// [engine] load_timeout_seconds can make as long as a large model's load (mlx-lm loads only then).
describe("a launch process stopped while the first token is awaited", () => {
  it("is said paused while the launch waits, and named by the ReadinessProbeFailed", async () => {
    const request = await makeRequest(world, { cluster: "stopped-at-probe", binary: world.standIns.coordinatorNeverCompletes, deadlines: { readinessMs: 6_000 } });
    const context = makeContext(world);
    const onEvent = context.onEvent!;
    context.onEvent = (event) => {
      onEvent(event);
      if (event.step !== "coordinator-healthy") return;
      const started = context.events.find((e) => e.step === "stage-1-started")!;
      process.kill(-Number(/^pid (\d+)/.exec(started.detail!)![1]), "SIGSTOP");
    };
    const error = await launchCluster(request, context).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(LaunchError);
    const failure = error as LaunchError;
    const steps = context.events.map((e) => e.step);
    expect(failure.reason, failure.message).toBe("ReadinessProbeFailed");
    expect(steps.indexOf("stage-1-paused"), steps.join(" ")).toBeGreaterThan(steps.indexOf("coordinator-healthy"));
    expect(steps.indexOf("stage-1-paused")).toBeLessThan(steps.indexOf("launch-failed"));
    expect(context.events.find((e) => e.step === "stage-1-paused")!.detail).toMatch(
      /: the launch waits for the first token through http:\/\/\S+\/v1\/completions until \S+Z, which cannot happen/,
    );
    expect(failure.message).toMatch(/did not answer within 6000 ms; stage-1 on node-2 is stopped \(pid \d+ in state T, a stop signal such as SIGSTOP\) since \S+$/);
    expect(await processesMentioning(world, join(world.root, "run", "stopped-at-probe"))).toEqual([]);
  });
});
