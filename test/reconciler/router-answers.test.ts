/**
 * A router that does not answer is not a registration that stands: its backend stays in the YAML
 * while the router process is dead or hung, and every request through it fails. Here the router is
 * a real `shardctl router` process the daemon does not run (registered through its YAML, whose
 * `server.bind_address` says where it listens); killed, then stopped with SIGSTOP, each cluster
 * registered there says Registered Unknown (RouterNotAnswering) and Degraded within seconds — the
 * resync is ten minutes away, so only the daemon's watch of the router can say it — while its
 * pipeline keeps serving untouched; `/metrics` says `shardctl_router_up` 0. A cluster launched
 * meanwhile comes up the same. Once the router answers again, Registered is True and the health Healthy.
 */
import { writeFile } from "node:fs/promises";
import { afterAll, expect, test } from "vitest";
import { spawnRouter, type RouterProcess } from "../router/support/router-process.js";
import { freePort } from "../support/free-ports.js";
import { allocateHost } from "../support/test-world.js";
import { conditionOf, enableMetrics, isReadyAt, waitForStatus } from "./daemon-fixture.js";
import { useDaemonWorld } from "./use-daemon-world.js";
import type { ClusterStatus } from "../../src/reconciler/index.js";

let router: RouterProcess | undefined;
let routerHealth: string;
let metricsUrl: string;
const dw = useDaemonWorld({
  settings: { enabled: true, router: "external" },
  resyncMs: 600_000,
  routerWatch: { intervalMs: 300, timeoutMs: 1_000, strikes: 2 },
  prepare: async (world) => {
    const host = await allocateHost();
    const port = await freePort(host);
    routerHealth = `http://${host}:${port}/health`;
    await writeFile(world.routerConfig, `server:\n  bind_address: "${host}:${port}"\nbackends: []\n`);
    router = await spawnRouter(world.routerConfig);
    metricsUrl = await enableMetrics(world);
  },
});
afterAll(async () => {
  router?.child.kill("SIGCONT");
  await router?.stop();
});

const notAnswering = (s: ClusterStatus): boolean => conditionOf(s, "Registered")?.reason === "RouterNotAnswering";
const answering = (s: ClusterStatus): boolean => conditionOf(s, "Registered")?.status === "True" && s.health === "Healthy";

/** `shardctl_router_up`'s value for the router's health URL, or undefined when the series is absent. */
async function routerUp(): Promise<number | undefined> {
  const series = `shardctl_router_up{url="${routerHealth}"} `;
  const line = (await (await fetch(metricsUrl)).text()).split("\n").find((l) => l.startsWith(series));
  return line === undefined ? undefined : Number(line.slice(series.length));
}

/**
 * The routed model's answer through the router once it has read the registration: the router
 * reloads its YAML on a file watch (50 ms after the write, later on a loaded machine), which the
 * status's Registered True does not wait for — a 404 before that is asked again, for up to 5 s.
 */
async function routedThroughRouter(model: string): Promise<string> {
  const deadline = Date.now() + 5_000;
  for (;;) {
    const answer = await throughRouter(model);
    if (answer !== "404" || Date.now() > deadline) return answer;
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** The routed model's answer through the router: its status code, or the connection's error. */
async function throughRouter(model: string): Promise<string> {
  const base = routerHealth.replace(/\/health$/, "");
  const body = JSON.stringify({ model, messages: [{ role: "user", content: "hi" }], max_tokens: 1, temperature: 0 });
  return fetch(`${base}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body, signal: AbortSignal.timeout(20_000) }).then(
    (r) => String(r.status),
    (error: unknown) => String((error as { cause?: { code?: string } }).cause?.code ?? error),
  );
}

test("a router killed makes its registered clusters Degraded within seconds, while they serve on; back to Healthy when it answers", async () => {
  const { world } = dw;
  const revision = await dw.define("routed", { nodes: ["l1", "l2"], register: true });
  const serving = await dw.waitServing("routed", revision);
  const healthy = await waitForStatus(world, "routed", answering, 30_000);
  expect(conditionOf(healthy, "Registered")).toMatchObject({ status: "True", reason: "BackendRegistered" });
  expect(await routedThroughRouter(world.modelDir)).toBe("200");
  expect(await routerUp()).toBe(1);
  const pids = serving.stages.map((s) => s.pid);

  const killed = router!;
  const ended = new Promise((done) => killed.child.once("exit", done));
  killed.child.kill("SIGKILL");
  await ended;
  const down = await waitForStatus(world, "routed", notAnswering, 15_000);
  expect(down.health).toBe("Degraded");
  expect(conditionOf(down, "Registered")!.status).toBe("Unknown");
  expect(conditionOf(down, "Registered")!.message).toContain(`the router does not answer at ${routerHealth}`);
  expect(conditionOf(down, "Registered")!.message).toMatch(/ECONNREFUSED/);
  // The cluster itself is untouched: Ready, the same processes, its coordinator answering.
  expect(isReadyAt(down, revision)).toBe(true);
  expect(down.stages.map((s) => s.pid)).toEqual(pids);
  expect((await fetch(`${serving.coordinator!.url}/health`)).status).toBe(200);
  expect(await routerUp()).toBe(0);

  // Launched while the router is down: it serves, and says it is not reachable through the router.
  const lateRevision = await dw.define("late", { nodes: ["l1", "l2"], register: true });
  const late = await waitForStatus(world, "late", (s) => isReadyAt(s, lateRevision) && notAnswering(s), 90_000);
  expect(late.health).toBe("Degraded");

  router = await spawnRouter(world.routerConfig);
  for (const name of ["routed", "late"]) await waitForStatus(world, name, answering, 15_000);
  expect(await routerUp()).toBe(1);
  expect(await throughRouter(world.modelDir)).toBe("200");
}, 240_000);

test("a router that hangs (stopped with SIGSTOP) is said not to answer too, and answering again once it goes on", async () => {
  const { world } = dw;
  await waitForStatus(world, "routed", answering, 15_000);
  router!.child.kill("SIGSTOP");
  try {
    const hung = await waitForStatus(world, "routed", notAnswering, 15_000);
    expect(hung.health).toBe("Degraded");
    expect(conditionOf(hung, "Registered")!.message).toContain("no answer within 1000 ms");
    expect(await routerUp()).toBe(0);
  } finally {
    router!.child.kill("SIGCONT");
  }
  await waitForStatus(world, "routed", answering, 15_000);
  expect(await routerUp()).toBe(1);
}, 120_000);
