/**
 * An edit that replaces a registered cluster (a new launch identity) never makes its model unknown
 * to the router: while the old launch is torn down and the new one comes up, the embedded router
 * answers 503 with Retry-After (clients retry) — never 404 (they give up) — then 200 again. The same
 * holds for a relaunch after a death that takes longer than the router's mark (60 s): each attempt
 * renews it, and so does a replacing edit's. A suspended cluster, which nothing relaunches, is not promised back.
 * A definition renamed (the new name launches once the old one's teardown frees the ports) is
 * promised back too.
 */
import { readFile, rename, writeFile } from "node:fs/promises";
import { createServer, type Socket } from "node:net";
import { expect, test } from "vitest";
import { relaunchFileOf } from "../../src/router/index.js";
import { killStage, removeDefinition, sleep, waitForStatus, type DaemonWorld } from "./daemon-fixture.js";
import { useDaemonWorld } from "./use-daemon-world.js";

const dw = useDaemonWorld({ sshNodes: 2, settings: { router: true } });

/** When the router's coming-back mark of the world's model ends, ms since the epoch; undefined without one. */
async function markOf(world: DaemonWorld): Promise<number | undefined> {
  const text = await readFile(relaunchFileOf(world.routerConfig), "utf8").catch(() => undefined);
  const until = text === undefined ? undefined : (JSON.parse(text) as { relaunching: Record<string, { until: string }> }).relaunching[world.modelDir]?.until;
  return until === undefined ? undefined : Date.parse(until);
}

/** A program holding a port: its release ends it as a program's exit does, its connections with it. */
interface PortHolder {
  release(): Promise<void>;
}

/** Listen on `port` as soon as the coordinator there lets it go (another program taking it); the holder. */
async function takePortWhenFree(port: number, deadlineMs: number): Promise<PortHolder> {
  const holder = createServer();
  // Whatever connects (a probe of the port) is held open, as by a program that never answers.
  const connections = new Set<Socket>();
  holder.on("connection", (socket) => {
    connections.add(socket);
    socket.once("close", () => connections.delete(socket));
  });
  const release = async (): Promise<void> => {
    const closed = new Promise((resolve) => holder.close(resolve));
    for (const socket of connections) socket.destroy();
    await closed;
  };
  const deadline = Date.now() + deadlineMs;
  for (;;) {
    const taken = await new Promise<boolean>((resolve) => {
      holder.once("error", () => resolve(false));
      holder.listen(port, "127.0.0.1", () => resolve(true));
    });
    if (taken) return { release };
    if (Date.now() > deadline) throw new Error(`port ${port} never came free`);
    await sleep(10);
  }
}

/** Ask the router for the world's model every 20 ms until `stop` is called; the count of each status it answered. */
function askWithoutPause(world: DaemonWorld, routerUrl: string | undefined): { stop(): Promise<Map<number, number>> } {
  const statuses = new Map<number, number>();
  let asking = true;
  const asker = (async () => {
    while (asking) {
      const response = await askModel(world, routerUrl).catch(() => undefined);
      if (response !== undefined) {
        statuses.set(response.status, (statuses.get(response.status) ?? 0) + 1);
        await response.body?.cancel();
      }
      await sleep(20);
    }
  })();
  return {
    async stop() {
      asking = false;
      await asker;
      return statuses;
    },
  };
}

/** The router's answer to a completion of the world's model. */
async function askModel(world: DaemonWorld, routerUrl: string | undefined): Promise<Response> {
  if (routerUrl === undefined) throw new Error("the daemon runs no router");
  return fetch(`${routerUrl}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: world.modelDir, prompt: "hi", max_tokens: 1 }),
    // An answer that never comes fails the test naming it, not at the test's own timeout.
    signal: AbortSignal.timeout(30_000),
  });
}

test("a replacing edit: 503 with Retry-After while the model comes back, never 404", async () => {
  const { world, daemon } = dw;
  const options = { nodes: ["n1", "n2"], ...(await dw.freeAddresses()), register: true };
  const first = await dw.define("edited", options);
  await dw.waitServing("edited", first);

  // Ask the router for the model without pause while the edit is applied.
  const statuses = new Map<number, number>();
  let retryAfter: string | null = null;
  let asking = true;
  const asker = (async () => {
    while (asking) {
      const response = await fetch(`${daemon.routerUrl}/v1/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: world.modelDir, prompt: "hi", max_tokens: 1 }),
      }).catch(() => undefined);
      if (response !== undefined) {
        statuses.set(response.status, (statuses.get(response.status) ?? 0) + 1);
        if (response.status === 503) retryAfter = response.headers.get("retry-after");
        await response.body?.cancel();
      }
      await sleep(20);
    }
  })();

  // A new context length is a new launch identity: the cluster is replaced.
  const second = await dw.define("edited", { ...options, contextLength: 512 });
  await dw.waitServing("edited", second);
  await sleep(300);
  asking = false;
  await asker;

  expect(statuses.get(404) ?? 0).toBe(0);
  expect(statuses.get(503) ?? 0).toBeGreaterThan(0);
  expect(retryAfter).toMatch(/^\d+$/);
  expect(statuses.get(200) ?? 0).toBeGreaterThan(0);
});

test("a relaunch after a death that keeps failing (its coordinator port held meanwhile): the router's coming-back mark is renewed at each attempt, 503 and never 404; served again once the port is free", async () => {
  const { world, daemon } = dw;
  // The first test's cluster serves the same model: gone, the router has no other backend for it.
  expect(await removeDefinition(world, "edited")).toBe(true);
  const addresses = await dw.freeAddresses();
  const revision = await dw.define("flaky", { nodes: ["n1", "n2"], ...addresses, register: true });
  const serving = await dw.waitServing("flaky", revision);

  // A stage dies; as soon as the old coordinator lets its port go, another program takes it.
  await killStage(serving, 1);
  const holder = await takePortWhenFree(addresses.port, 20_000);
  try {
    const first = await waitForStatus(world, "flaky", (s) => s.restarts?.evidence.some((e) => e.reason === "PortInUse") === true, 30_000);
    const markedFirst = await markOf(world);
    expect(markedFirst).toBeGreaterThan(Date.now());
    const tried = first.restarts!.evidence.length;
    // Another attempt after the back-off: the mark moves on with it.
    await waitForStatus(world, "flaky", (s) => (s.restarts?.evidence.length ?? 0) > tried, 30_000);
    await sleep(300);
    expect(await markOf(world)).toBeGreaterThan(markedFirst!);
    const answer = await askModel(world, daemon.routerUrl);
    expect(answer.status).toBe(503);
    expect(answer.headers.get("retry-after")).toMatch(/^\d+$/);
  } finally {
    await holder.release();
  }
  await dw.waitServing("flaky", revision, 90_000);
  // Served again: the mark is gone with the registration.
  expect(await markOf(world)).toBeUndefined();
  // Above the sum of its waits' own limits (about 200 s), so a wait that runs out names its step.
}, 240_000);

test("a suspended cluster that loses a stage is not promised back: no coming-back mark, the router answers 404", async () => {
  const { world, daemon } = dw;
  const healthy = await waitForStatus(world, "flaky", (s) => s.health === "Healthy", 30_000);
  const text = await readFile(`${world.clustersDir}/flaky.toml`, "utf8");
  await writeFile(`${world.clustersDir}/flaky.toml`, text.replace("suspend = false", "suspend = true"));
  const suspended = await waitForStatus(world, "flaky", (s) => s.health === "Suspended", 30_000);
  await killStage(suspended.stages.length > 0 ? suspended : healthy, 1);
  // Torn down and withdrawn, never relaunched while suspended.
  await waitForStatus(world, "flaky", (s) => s.stages.length === 0 || s.stages.some((c) => !c.alive), 30_000);
  const deadline = Date.now() + 20_000;
  let status = 0;
  while (Date.now() < deadline) {
    const answer = await fetch(`${daemon.routerUrl}/v1/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: world.modelDir, prompt: "hi", max_tokens: 1 }),
    });
    status = answer.status;
    if (status === 404) break;
    await sleep(200);
  }
  expect(status).toBe(404);
  const marks = await readFile(relaunchFileOf(world.routerConfig), "utf8").catch(() => "{}");
  expect(marks).not.toContain(world.modelDir);
}, 120_000);

test("a replacing edit whose new launch keeps failing (its coordinator port taken meanwhile): the mark is renewed with each attempt, 503 and never 404; served once the port is free", async () => {
  const { world, daemon } = dw;
  const addresses = await dw.freeAddresses();
  const options = { nodes: ["n1", "n2"], ...addresses, register: true };
  // Only this cluster serves the model now.
  expect(await removeDefinition(world, "flaky")).toBe(true);
  const first = await dw.define("renewed", options);
  await dw.waitServing("renewed", first);
  const second = await dw.define("renewed", { ...options, contextLength: 512 });
  // As soon as the old coordinator lets its port go, another program takes it.
  const holder = await takePortWhenFree(addresses.port, 30_000);
  try {
    const failed = await waitForStatus(
      world,
      "renewed",
      (s) => s.observedRevision === second && s.restarts?.evidence.some((e) => e.reason === "PortInUse") === true,
      30_000,
    );
    await sleep(300);
    const markedFirst = await markOf(world);
    expect(markedFirst).toBeGreaterThan(Date.now());
    const tried = failed.restarts!.evidence.length;
    await waitForStatus(world, "renewed", (s) => (s.restarts?.evidence.length ?? 0) > tried, 30_000);
    await sleep(300);
    expect(await markOf(world)).toBeGreaterThan(markedFirst!);
    expect((await askModel(world, daemon.routerUrl)).status).toBe(503);
  } finally {
    await holder.release();
  }
  await dw.waitServing("renewed", second, 90_000);
  expect(await markOf(world)).toBeUndefined();
  expect(await removeDefinition(world, "renewed")).toBe(true);
  // Above the sum of its waits' own limits (about 200 s), so a wait that runs out names its step.
}, 240_000);

test("a definition renamed (git mv): 503 with Retry-After while the new name waits for the old one's teardown, never 404", async () => {
  const { world, daemon } = dw;
  const revision = await dw.define("before", { nodes: ["n1", "n2"], ...(await dw.freeAddresses()), register: true });
  await dw.waitServing("before", revision);
  const asking = askWithoutPause(world, daemon.routerUrl);
  // The same definition under a new name: the same ports, so it launches once the old is torn down.
  await rename(`${world.clustersDir}/before.toml`, `${world.clustersDir}/after.toml`);
  await waitForStatus(world, "after", (s) => s.health === "Healthy" && s.stages.length === 2 && s.stages.every((c) => c.alive), 60_000);
  await sleep(300);
  const statuses = await asking.stop();
  expect(statuses.get(404) ?? 0).toBe(0);
  expect(statuses.get(503) ?? 0).toBeGreaterThan(0);
  expect(statuses.get(200) ?? 0).toBeGreaterThan(0);
  expect(await markOf(world)).toBeUndefined();
  expect(await removeDefinition(world, "after")).toBe(true);
}, 120_000);

test("a definition renamed whose new name cannot launch yet (its coordinator port taken as the old one lets it go): the new name keeps the model promised back with each attempt, 503 and never 404", async () => {
  const { world, daemon } = dw;
  const addresses = await dw.freeAddresses();
  const revision = await dw.define("renamed-from", { nodes: ["n1", "n2"], ...addresses, register: true });
  await dw.waitServing("renamed-from", revision);
  await rename(`${world.clustersDir}/renamed-from.toml`, `${world.clustersDir}/renamed-to.toml`);
  const holder = await takePortWhenFree(addresses.port, 20_000);
  try {
    const first = await waitForStatus(world, "renamed-to", (s) => s.lastError?.reason === "PortInUse", 30_000);
    const markedFirst = await markOf(world);
    expect(markedFirst).toBeGreaterThan(Date.now());
    // Another attempt of the new name after its back-off: the mark moves on with it. Regression: it
    // was the pruned name's alone, and ran out 60 s after the prune (404 while the new one still tried).
    await waitForStatus(world, "renamed-to", (s) => s.lastError?.reason === "PortInUse" && s.lastError.at !== first.lastError!.at, 30_000);
    await sleep(300);
    expect(await markOf(world)).toBeGreaterThan(markedFirst!);
    const answer = await askModel(world, daemon.routerUrl);
    expect(answer.status).toBe(503);
  } finally {
    await holder.release();
  }
  await waitForStatus(world, "renamed-to", (s) => s.health === "Healthy" && s.stages.length === 2 && s.stages.every((c) => c.alive), 90_000);
  expect(await markOf(world)).toBeUndefined();
  expect(await removeDefinition(world, "renamed-to")).toBe(true);
  // Above the sum of its waits' own limits (about 200 s), so a wait that runs out names its step.
}, 240_000);

test("a definition removed while another serves the same model: nothing is promised back (the model stays routed), and the other holds no mark to renew", async () => {
  const { world, daemon } = dw;
  const a = await dw.define("twin-a", { nodes: ["n1", "n2"], ...(await dw.freeAddresses()), register: true });
  const b = await dw.define("twin-b", { nodes: ["n1", "n2"], ...(await dw.freeAddresses()), register: true });
  await dw.waitServing("twin-a", a);
  await dw.waitServing("twin-b", b);
  expect(await removeDefinition(world, "twin-a")).toBe(true);
  // Regression: the mark was set and handed to twin-b, whose every pass renewed it for good.
  expect(await markOf(world)).toBeUndefined();
  expect((await askModel(world, daemon.routerUrl)).status).toBe(200);
  expect(await removeDefinition(world, "twin-b")).toBe(true);
}, 120_000);
