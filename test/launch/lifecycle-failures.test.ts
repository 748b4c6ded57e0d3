/**
 * A launch is all or nothing: a failure injected at each launch step leaves nothing running on
 * any node (ps), nothing in the ledger or the router, and names the step. Failures come from
 * stand-in engine binaries (`[engine] binary`), an occupied port and an unwritable router config.
 * Also: two clusters on the same nodes get disjoint ports; teardown never signals a pid whose start
 * time does not match the ledger. Needs `npm run build`.
 */
import { mkdir, readFile } from "node:fs/promises";
import { createServer, type Server } from "node:net";
import { dirname, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LaunchError, launchCluster, teardownCluster, type LaunchRequest } from "../../src/launch/index.js";
import { createRegistrar, type Registrar } from "../../src/router/index.js";
import { enginePidOf, makeContext, makeRequest, processesMentioning, startLifecycleWorld, tearDownLeft, type LifecycleWorld } from "./lifecycle-fixture.js";

let world: LifecycleWorld;

beforeAll(async () => {
  world = await startLifecycleWorld();
});
afterAll(async () => {
  await world?.close();
});

/** Launch, expect a LaunchError, and check that nothing of the cluster is left anywhere. */
async function expectCleanFailure(request: LaunchRequest, registrar?: Registrar): Promise<LaunchError & { events: string[] }> {
  const context = makeContext(world, registrar);
  const started = Date.now();
  const error = await launchCluster(request, context).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(LaunchError);
  const failure = error as LaunchError;
  expect(await processesMentioning(world, join(world.root, "run", request.cluster))).toEqual([]);
  expect(await world.ledger.read(request.cluster)).toBeUndefined();
  expect(await world.registrar.lookup(request.cluster)).toBeUndefined();
  const steps = context.events.map((e) => e.step);
  expect(steps).toContain("launch-failed");
  expect(steps.at(-1)).toBe("torn-down");
  // Every failure is found well inside the deadline of the phase that failed.
  expect(Date.now() - started).toBeLessThan(20_000);
  return Object.assign(failure, { events: steps });
}

describe("a launch failure at each step leaves nothing running and names the step", () => {
  it("StageExited: the engine binary exits 3", async () => {
    const failure = await expectCleanFailure(await makeRequest(world, { cluster: "exits", binary: world.standIns.exit3 }));
    expect(failure.reason, `${failure.step}: ${failure.message}`).toBe("StageExited");
    expect(failure.step).toMatch(/^stage-[01]-(start|listen)$/);
    expect(failure.message).toMatch(/status 3/);
    expect(failure.logTail).toContain("stand-in engine: cannot open the model");
    expect(failure.events).not.toContain("coordinator-started");
  });

  it("StageExited: the engine binary exits 255, which is said as its status, not as a signal", async () => {
    const failure = await expectCleanFailure(await makeRequest(world, { cluster: "exits255", binary: world.standIns.exit255 }));
    expect(failure.reason, `${failure.step}: ${failure.message}`).toBe("StageExited");
    expect(failure.message).toMatch(/ exited with status 255 /);
    expect(failure.message).not.toContain("killed by");
  });

  it("StageExited: an engine that puts itself in the background is said to, and what it left running is stopped with the launch", async () => {
    const pidsFile = join(dirname(world.standIns.daemonizes), "daemonized.pids");
    const failure = await expectCleanFailure(await makeRequest(world, { cluster: "daemonizes", binary: world.standIns.daemonizes }));
    expect(failure.reason, `${failure.step}: ${failure.message}`).toBe("StageExited");
    expect(failure.message).toMatch(
      / exited with status 0, leaving 1 process in the background \(pid \d+: the engine put itself there \(an option to daemonize: shardctl supervises an engine in the foreground/,
    );
    const left = (await readFile(pidsFile, "utf8")).trim().split("\n").map(Number);
    expect(left.length).toBeGreaterThan(0);
    // Each one the stand-in put in the background is gone (or a zombie its new parent has not reaped yet).
    for (const pid of left) expect(await runningState(pid), `pid ${pid}`).toBeUndefined();
  });

  it("PortInUse: a stage's transport port taken between the check and its listen (EADDRINUSE; an outgoing connection holds it), with what to reserve", async () => {
    const failure = await expectCleanFailure(await makeRequest(world, { cluster: "taken", binary: world.standIns.listenRefused }));
    expect(failure.reason, `${failure.step}: ${failure.message}`).toBe("PortInUse");
    expect(failure.step).toMatch(/^stage-[01]-(start|listen)$/);
    expect(failure.message).toContain("its transport port was taken after it was found free (EADDRINUSE)");
    expect(failure.message).toContain("net.ipv4.ip_local_reserved_ports");
    expect(failure.logTail.join("\n")).toContain("EADDRINUSE");
  });

  it("PortInUse: EADDRINUSE in the words of a Python, Go or C engine ('Address already in use')", async () => {
    const failure = await expectCleanFailure(await makeRequest(world, { cluster: "taken-py", binary: world.standIns.listenRefusedPython }));
    expect(failure.reason, `${failure.step}: ${failure.message}`).toBe("PortInUse");
    expect(failure.message).toContain("its transport port was taken after it was found free (Address already in use)");
  });

  it("PortInUse: the coordinator's port taken between the check and its listen, not counted as the engine's failure", async () => {
    const failure = await expectCleanFailure(await makeRequest(world, { cluster: "taken-coord", binary: world.standIns.coordinatorPortTaken }));
    expect(failure.reason, `${failure.step}: ${failure.message}`).toBe("PortInUse");
    expect(failure.step).toMatch(/^coordinator-(start|health)$/);
    expect(failure.message).toMatch(
      /^(the )?coordinator on \S+ exited with status 1 .*: its control or HTTP port was taken after it was found free \(Address already in use\)/,
    );
  });

  it("PortInUse: a wildcard HTTP host (0.0.0.0) beside a listener on one address of its port, found before anything starts", async () => {
    const request = await makeRequest(world, { cluster: "taken-wild" });
    const holder: Server = createServer();
    await new Promise<void>((resolve) => holder.listen(request.coordinator.httpPort, request.coordinator.bindHost, resolve));
    try {
      request.coordinator.bindHost = "0.0.0.0";
      const failure = await expectCleanFailure(request);
      expect(failure.reason, `${failure.step}: ${failure.message}`).toBe("PortInUse");
      expect(failure.step).toBe("ports");
      expect(failure.message).toContain(`the coordinator's HTTP port 0.0.0.0:${request.coordinator.httpPort} is already in use on node-1 by pid ${process.pid}`);
    } finally {
      await new Promise((resolve) => holder.close(resolve));
    }
  });

  it("StageExited: a stage that says its port was taken while no socket holds it is counted as the engine's own failure, never retried for ever", async () => {
    const failure = await expectCleanFailure(await makeRequest(world, { cluster: "taken-not", binary: world.standIns.listenRefusedFalsely }));
    expect(failure.reason, `${failure.step}: ${failure.message}`).toBe("StageExited");
    expect(failure.message).toMatch(
      /\(its log says its port was taken \("Address already in use"\), but no socket on \S+ holds it now: counted as the engine's own failure\)$/,
    );
  });

  it("StageExited: the same words after the stage had listened, its port free again, while the launch waited for /health", async () => {
    const failure = await expectCleanFailure(
      await makeRequest(world, { cluster: "taken-late", binary: world.standIns.stagePortTakenWhileServerLoads, deadlines: { coordinatorHealthMs: 60_000 } }),
    );
    expect(failure.reason, `${failure.step}: ${failure.message}`).toBe("StageExited");
    expect(failure.step).toBe("coordinator-health");
    expect(failure.message).toMatch(/^stage-1 on \S+ exited with status 1 while the launch waited for .*\(its log says its port was taken/);
  });

  it("StageExited: a bad model directory", async () => {
    const request = await makeRequest(world, { cluster: "badmodel" });
    request.stages[1]!.modelDir = join(world.root, "no-such-model");
    const failure = await expectCleanFailure(request);
    expect(failure.reason, `${failure.step}: ${failure.message}`).toBe("StageExited");
    // Stages start together: stage-1 may exit while the launch still waits for stage-0 to listen.
    expect(failure.step).toMatch(/^stage-(1-start|[01]-listen)$/);
    expect(failure.message).toMatch(/^stage-1 on /);
    expect(failure.logTail.join("\n")).toMatch(/no-such-model/);
    // Stage 0 was started (and stopped again): the teardown covered what was already running.
    expect(failure.events).toContain("stage-0-stopped");
  });

  it("StageListenTimeout: a binary that sleeps without listening", async () => {
    const failure = await expectCleanFailure(await makeRequest(world, { cluster: "sleeps", binary: world.standIns.sleep, deadlines: { stageListenMs: 1_000 } }));
    expect(failure.reason, `${failure.step}: ${failure.message}`).toBe("StageListenTimeout");
    expect(failure.step).toBe("stage-0-listen");
    expect(failure.message).toMatch(
      /within 1000 ms; it ran all along: a model that takes longer to load needs \[engine\] load_timeout_seconds \(seconds\) above its load time$/,
    );
    expect(failure.events.filter((s) => s.endsWith("-stopped"))).toEqual(["stage-1-stopped", "stage-0-stopped"]);
  });

  it("PortInUse: something holds the coordinator's HTTP port", async () => {
    const host = world.hosts.get("node-1")!;
    const squatter: Server = createServer();
    await new Promise<void>((resolve) => squatter.listen(0, host, resolve));
    const port = (squatter.address() as { port: number }).port;
    try {
      const failure = await expectCleanFailure(await makeRequest(world, { cluster: "squatted", httpPort: port }));
      expect(failure.reason, `${failure.step}: ${failure.message}`).toBe("PortInUse");
      expect(failure.step).toBe("ports");
      expect(failure.message).toContain(`${host}:${port}`);
      expect(failure.events).not.toContain("stage-0-started");
    } finally {
      squatter.close();
    }
  });

  it("CoordinatorExited: the coordinator exits 4 after the stages listen", async () => {
    const failure = await expectCleanFailure(await makeRequest(world, { cluster: "coordexits", binary: world.standIns.coordinatorExits }));
    expect(failure.reason, `${failure.step}: ${failure.message}`).toBe("CoordinatorExited");
    expect(failure.step).toMatch(/^coordinator-(start|health)$/);
    expect(failure.message).toMatch(/status 4/);
    expect(failure.events).toContain("stage-1-listening");
    expect(failure.events.filter((s) => s.endsWith("-stopped"))).toEqual(["coordinator-stopped", "stage-1-stopped", "stage-0-stopped"]);
  });

  it("StageExited: a stage that dies while the coordinator loads ends the wait for /health then, named with its log, not at the deadline", async () => {
    const started = Date.now();
    const failure = await expectCleanFailure(
      await makeRequest(world, { cluster: "stagedies", binary: world.standIns.stageDiesWhileServerLoads, deadlines: { coordinatorHealthMs: 60_000 } }),
    );
    expect(failure.reason, `${failure.step}: ${failure.message}`).toBe("StageExited");
    expect(failure.step).toBe("coordinator-health");
    expect(failure.message).toMatch(
      /^stage-1 on \S+ exited with status 1 while the launch waited for http:\/\/\S+\/health to answer 200 \(it last answered 503 \(loading\)/,
    );
    expect(failure.logTail.at(-1)).toBe("stand-in stage: fatal: out of memory while loading layer 3");
    expect(Date.now() - started).toBeLessThan(15_000);
  });

  it("StageExited: a stage that dies at load while an earlier stage still loads ends the wait for that one then, named with its log", async () => {
    const started = Date.now();
    const failure = await expectCleanFailure(
      await makeRequest(world, { cluster: "stagedies2", binary: world.standIns.stageDiesWhileStageLoads, deadlines: { stageListenMs: 60_000 } }),
    );
    expect(failure.reason, `${failure.step}: ${failure.message}`).toBe("StageExited");
    // The step is the one that waited, as for the waits for /health and the first token.
    expect(failure.step).toBe("stage-0-listen");
    expect(failure.message).toMatch(/^stage-1 on \S+ exited with status 1 while the launch waited for stage-0 on \S+ to listen on \S+:\d+/);
    expect(failure.logTail.at(-1)).toBe("stand-in stage: fatal: cannot allocate the KV cache");
    expect(Date.now() - started).toBeLessThan(15_000);
  });

  it("StageListenTimeout: a stage that listens on another port than it was given says where, not only 'load longer'", async () => {
    const request = await makeRequest(world, { cluster: "elsewhere", binary: world.standIns.stageListensElsewhere, deadlines: { stageListenMs: 2_000 } });
    const failure = await expectCleanFailure(request);
    expect(failure.reason, `${failure.step}: ${failure.message}`).toBe("StageListenTimeout");
    const asked = failure.message.match(/did not listen on (\S+):(\d+) within/);
    expect(asked, failure.message).not.toBeNull();
    expect(failure.message).toContain(`; it ran all along, listening on ${asked![1]}:${Number(asked![2]) + 1} but not there: an engine that binds another address`);
  });

  it("CoordinatorHealthTimeout: a coordinator listening on another port than it was given says where it listens", async () => {
    const request = await makeRequest(world, { cluster: "elsewhere2", binary: world.standIns.coordinatorListensElsewhere, deadlines: { coordinatorHealthMs: 2_000 } });
    const failure = await expectCleanFailure(request);
    expect(failure.reason, `${failure.step}: ${failure.message}`).toBe("CoordinatorHealthTimeout");
    const port = request.coordinator.httpPort;
    expect(failure.message).toContain("refused the connection");
    expect(failure.message).toMatch(
      new RegExp(`; its processes listen on (\\S+, )*${request.coordinator.bindHost.replace(/\./g, "\\.")}:${port + 1}(, \\S+)* but not there`),
    );
  });

  it("an engine that floods its log while it loads has it kept bounded during the launch, not only once it serves", async () => {
    const request = await makeRequest(world, { cluster: "floods", binary: world.standIns.stageFloodsWhileLoading, deadlines: { stageListenMs: 8_000 } });
    const trimmed: string[] = [];
    const context = { ...makeContext(world), onLogTrimmed: (node: string, file: string, bytes: number) => trimmed.push(`${node} ${file} ${bytes}`) };
    const failure = await launchCluster(request, context).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(failure).toBeInstanceOf(LaunchError);
    expect((failure as LaunchError).reason).toBe("StageListenTimeout");
    // Emptied at a look 2 s into the launch (then 4 s), its end kept beside it.
    expect(trimmed.length, trimmed.join("\n")).toBeGreaterThanOrEqual(1);
    expect(trimmed[0]).toMatch(/^node-1 \S+\/stage-0\.log \d{8}$/);
  });

  it("CoordinatorHealthTimeout: a coordinator that answers /health 503 for ever", async () => {
    const failure = await expectCleanFailure(
      await makeRequest(world, { cluster: "loading", binary: world.standIns.coordinatorNeverHealthy, deadlines: { coordinatorHealthMs: 1_500 } }),
    );
    expect(failure.reason, `${failure.step}: ${failure.message}`).toBe("CoordinatorHealthTimeout");
    expect(failure.step).toBe("coordinator-health");
    expect(failure.logTail.join("\n")).toMatch(/stand-in coordinator listening \(loading\)/);
    expect(failure.message).toMatch(/did not answer 200 within 1500 ms; it last answered 503 \(loading\): \{"error":\{"code":503,"message":"Loading model"\}\}/);
    // Loading is what a launch expects to hear: not an answer to show while it waits.
    expect(failure.events).not.toContain("coordinator-answered");
  });

  // Regression: the timeout said only "did not answer 200", alike for a 404, a 503, silence and a refusal.
  it("CoordinatorHealthTimeout: a server answering 404 to everything is named by what it answered", async () => {
    const failure = await expectCleanFailure(
      await makeRequest(world, { cluster: "elsewhere", binary: world.standIns.coordinatorNotFound, deadlines: { coordinatorHealthMs: 1_500 } }),
    );
    expect(failure.reason, `${failure.step}: ${failure.message}`).toBe("CoordinatorHealthTimeout");
    // How many times in a row is said from the second answer on: a loaded machine may start the server late enough for one.
    expect(failure.message).toMatch(/\/health did not answer 200 within 1500 ms; it last answered 404: Not Found( \(\d+ times in a row\))?$/);
    // Said while the wait went on (Ready's message quotes it), once however many times it came.
    expect(failure.events.filter((step) => step === "coordinator-answered")).toHaveLength(1);
  });

  // Regression: a body that was not JSON failed with the parser's words ("Unexpected token '<'").
  it("ReadinessProbeFailed: a completion answered with a web page says so", async () => {
    const failure = await expectCleanFailure(await makeRequest(world, { cluster: "page", binary: world.standIns.coordinatorAnswersHtml }));
    expect(failure.reason, `${failure.step}: ${failure.message}`).toBe("ReadinessProbeFailed");
    expect(failure.message).toMatch(/answered 200 with a body that is not JSON, so not an OpenAI completion: <html><body>proxy login<\/body><\/html>/);
  });

  it("ReadinessProbeFailed: /health says 200 but completions fail", async () => {
    const failure = await expectCleanFailure(await makeRequest(world, { cluster: "hollow", binary: world.standIns.coordinatorFailsCompletions }));
    expect(failure.reason, `${failure.step}: ${failure.message}`).toBe("ReadinessProbeFailed");
    expect(failure.step).toBe("readiness-probe");
    expect(failure.message).toMatch(/answered 500/);
    // An engine that answers 500 while it loads learns why its launch failed at once.
    expect(failure.message).toContain("(only a 503 is taken for an engine still loading and asked again; any other answer fails the launch)");
    expect(failure.events).toContain("coordinator-healthy");
  });

  // Regression: nothing watched the processes while the first token was awaited (mlx-lm loads the
  // model only then): a stage that exited meanwhile was found only at the probe's deadline, unnamed.
  it("StageExited: a stage that exits while the first token is awaited fails the launch at once, named", async () => {
    const request = await makeRequest(world, { cluster: "dies-at-probe", binary: world.standIns.coordinatorNeverCompletes, deadlines: { readinessMs: 30_000 } });
    const context = makeContext(world);
    const onEvent = context.onEvent!;
    context.onEvent = (event) => {
      onEvent(event);
      if (event.step !== "coordinator-healthy") return;
      const started = context.events.find((e) => e.step === "stage-0-started")!;
      const wrapper = Number(/^pid (\d+)/.exec(started.detail!)![1]);
      void enginePidOf(world.nodeFor("node-1"), wrapper).then((pid) => process.kill(pid, "SIGKILL"));
    };
    const started = Date.now();
    const failure = (await launchCluster(request, context).then(
      () => undefined,
      (e: unknown) => e,
    )) as LaunchError;
    expect(failure).toBeInstanceOf(LaunchError);
    expect(failure.reason, `${failure.step}: ${failure.message}`).toBe("StageExited");
    expect(failure.step).toBe("readiness-probe");
    expect(failure.message).toMatch(/^stage-0 on node-1 was killed by SIGKILL .*while the launch waited for the first token/);
    expect(Date.now() - started).toBeLessThan(20_000);
    expect(await processesMentioning(world, join(world.root, "run", request.cluster))).toEqual([]);
  });

  // Regression: the probe read the whole body: an engine that sent gigabytes grew the daemon by as much.
  it("ReadinessProbeFailed: a completion answered with a body without end is read to 1 MiB, not further, and said so", async () => {
    const failure = await expectCleanFailure(
      await makeRequest(world, { cluster: "endless", binary: world.standIns.coordinatorEndlessBody, deadlines: { readinessMs: 20_000 } }),
    );
    expect(failure.reason, `${failure.step}: ${failure.message}`).toBe("ReadinessProbeFailed");
    expect(failure.message).toMatch(/POST \/v1\/completions answered 200 with a body past 1048576 bytes, where a one-token completion takes a few hundred: xxxx/);
  });

  // Regression: an answer whose body never ended was said not to have answered at all.
  it("ReadinessProbeFailed: a completion whose head came but whose body never ends says so", async () => {
    const failure = await expectCleanFailure(
      await makeRequest(world, { cluster: "stalls", binary: world.standIns.coordinatorBodyStalls, deadlines: { readinessMs: 1_500 } }),
    );
    expect(failure.reason, `${failure.step}: ${failure.message}`).toBe("ReadinessProbeFailed");
    expect(failure.message).toMatch(/POST \/v1\/completions answered 200, but its body did not end within 1500 ms/);
  });

  it("ReadinessProbeFailed: /health says 200 but a completion never answers, named with the deadline", async () => {
    const failure = await expectCleanFailure(
      await makeRequest(world, { cluster: "hung", binary: world.standIns.coordinatorNeverCompletes, deadlines: { readinessMs: 1_000 } }),
    );
    expect(failure.reason, `${failure.step}: ${failure.message}`).toBe("ReadinessProbeFailed");
    expect(failure.step).toBe("readiness-probe");
    expect(failure.message).toMatch(/POST \/v1\/completions did not answer within 1000 ms/);
    expect(failure.events).toContain("coordinator-healthy");
  });

  it("the one-token probe asks again while the engine answers 503 behind a /health of 200 (a model still loading), and the launch succeeds", async () => {
    const request = await makeRequest(world, { cluster: "warming", binary: world.standIns.coordinatorWarming, register: false, deadlines: { readinessMs: 20_000 } });
    const context = makeContext(world);
    try {
      await launchCluster(request, context);
      expect(context.events.map((e) => e.step)).toContain("readiness-probe-passed");
    } finally {
      await tearDownLeft(world, "warming");
    }
    // Asked until its deadline: one that never stops answering 503 is named by what it last answered.
    const failure = await expectCleanFailure(
      await makeRequest(world, { cluster: "never-warm", binary: world.standIns.coordinatorCold, deadlines: { readinessMs: 1_500 } }),
    );
    expect(failure.reason, `${failure.step}: ${failure.message}`).toBe("ReadinessProbeFailed");
    expect(failure.message).toMatch(
      /POST \/v1\/completions did not answer 200 within 1500 ms; it last answered 503: \{"error":\{"code":503,"message":"Loading model"\}\} \(still loading: a model that loads longer needs \[engine\] load_timeout_seconds above its load time\)/,
    );
  });

  it("RouterRegistrationFailed: the router config path is a directory", async () => {
    const dir = join(world.root, "router-config-is-a-dir.yaml");
    await mkdir(dir, { recursive: true });
    const failure = await expectCleanFailure(await makeRequest(world, { cluster: "unroutable" }), createRegistrar({ kind: "continuum", config: dir }));
    expect(failure.reason, `${failure.step}: ${failure.message}`).toBe("RouterRegistrationFailed");
    expect(failure.step).toBe("router-registration");
    expect(failure.events).toContain("readiness-probe-passed");
    expect(failure.events.filter((s) => s.endsWith("-stopped"))).toEqual(["coordinator-stopped", "stage-1-stopped", "stage-0-stopped"]);
  });
});

describe("ports and teardown safety", () => {
  it("two clusters on the same nodes get disjoint ports", async () => {
    const a = await makeRequest(world, { cluster: "left", register: false });
    const b = await makeRequest(world, { cluster: "right", register: false });
    b.portRange = a.portRange;
    const context = makeContext(world);
    await launchCluster(a, context);
    await launchCluster(b, context);
    try {
      const left = (await world.ledger.read("left"))!;
      const right = (await world.ledger.read("right"))!;
      const key = (p: { host: string; port: number }): string => `${p.host}:${p.port}`;
      const leftPorts = new Set(left.ports.map(key));
      expect(right.ports.map(key).filter((k) => leftPorts.has(k))).toEqual([]);
      // Both really serve.
      for (const entry of [left, right]) {
        const health = await fetch(`${entry.coordinatorUrl}/health`);
        expect(health.status).toBe(200);
      }
    } finally {
      for (const cluster of ["left", "right"]) await tearDownLeft(world, cluster);
    }
    expect(await processesMentioning(world, join(world.root, "run", "left"))).toEqual([]);
    expect(await processesMentioning(world, join(world.root, "run", "right"))).toEqual([]);
  });

  it("teardown refuses to signal a live pid whose start time does not match the ledger", async () => {
    const node = world.nodeFor("node-2");
    const dir = join(world.root, "innocent");
    await mkdir(dir, { recursive: true });
    const innocent = await node.startDetached(["sleep", "30"], { logFile: join(dir, "log"), cwd: dir });
    try {
      const result = await teardownCluster(
        {
          cluster: "stale",
          revision: "r",
          phase: "running",
          startedAt: new Date().toISOString(),
          processes: [
            { role: "stage", index: 0, node: "node-2", pid: innocent.pid, startTime: "linux:1", runDir: dir, logFile: join(dir, "log"), exitFile: join(dir, "exit") },
          ],
          ports: [],
        },
        { ledger: world.ledger, registrar: world.registrar, nodeFor: world.nodeFor, graceMs: 500 },
      );
      expect(result.stopped).toEqual([{ label: "stage-0", node: "node-2", outcome: "recycled" }]);
      expect(await node.processStartTime(innocent.pid)).toBe(innocent.startTime);
      // Idempotent: a second run over the same (now forgotten) record is harmless.
      expect(await world.ledger.read("stale")).toBeUndefined();
    } finally {
      await node.signal(innocent.pid, "SIGKILL", innocent.startTime);
    }
  });
});

/** The state letter of a live process (R, S, T…), or undefined when it is gone or a zombie. */
async function runningState(pid: number): Promise<string | undefined> {
  const stat = await readFile(`/proc/${pid}/stat`, "utf8").catch(() => undefined);
  const state = stat?.slice(stat.lastIndexOf(")") + 2).split(" ")[0];
  return state === undefined || state === "Z" ? undefined : state;
}
