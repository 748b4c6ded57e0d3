// The dashboard's JSON endpoints and event stream, served by a real daemon (in this process) on a
// plan-only world (distributed serving off: the daemon plans and reports, launches nothing). Every
// body is checked against schemas/status.schema.json with ajv.
import { request as httpRequest } from "node:http";
import { readdir, rm } from "node:fs/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Daemon } from "../../src/reconciler/index.js";
import {
  definitionText,
  revisionOf,
  runShardctl,
  startInProcessDaemon,
  startWorld,
  waitForStatus,
  writeDefinition,
  type DaemonWorld,
} from "../reconciler/daemon-fixture.js";
import { assertSchema, enableDashboard, SseReader } from "./support.js";

let world: DaemonWorld;
let daemon: Daemon;
let base: string;

beforeAll(async () => {
  world = await startWorld();
  await enableDashboard(world);
  await writeDefinition(world, "alpha", definitionText(world, { nodes: ["l1", "l2"] }));
  await writeDefinition(world, "beta", definitionText(world, { nodes: ["l2"] }));
  daemon = await startInProcessDaemon(world);
  base = daemon.uiUrl!;
  await waitForStatus(world, "alpha", (s) => s.plan !== undefined);
  await waitForStatus(world, "beta", (s) => s.plan !== undefined);
  await daemon.whenIdle();
});

afterAll(async () => {
  await daemon?.stop();
  await world?.close();
});

async function getJson(path: string): Promise<{ status: number; body: unknown }> {
  const response = await fetch(new URL(path, base));
  return { status: response.status, body: await response.json() };
}

describe("the dashboard's endpoints", () => {
  it("listens on the loopback address it was given, port 0 resolved to a real port", () => {
    expect(base).toMatch(/^http:\/\/127\.0\.0\.1:[1-9][0-9]*\/$/);
  });

  it("GET /api/clusters: every status, each valid, the same as `shardctl status --json`", async () => {
    const { status, body } = await getJson("api/clusters");
    expect(status).toBe(200);
    const list = body as Array<{ cluster: string }>;
    expect(list.map((s) => s.cluster)).toEqual(["alpha", "beta"]);
    list.forEach((s) => assertSchema(s, "status", `GET /api/clusters ${s.cluster}`));
    const cli = await runShardctl(world, ["status", "--json"]);
    expect(cli.code).toBe(0);
    expect(list).toEqual(JSON.parse(cli.stdout));
  });

  it("GET /api/clusters/<name>: one status; an unknown name is a 404 with a reason", async () => {
    const one = await getJson("api/clusters/alpha");
    expect(one.status).toBe(200);
    assertSchema(one.body, "status", "GET /api/clusters/alpha");
    expect(one.body).toMatchObject({ cluster: "alpha", plan: { feasible: true } });
    const missing = await getJson("api/clusters/nope");
    expect(missing).toEqual({ status: 404, body: { error: { reason: "DashboardClusterNotFound", message: expect.stringContaining("nope") } } });
  });

  it("GET /api/events: hello, a status per cluster, then each new status as the daemon writes it, and removals", async () => {
    const stream = new SseReader(new URL("api/events", base).href);
    try {
      const hello = await stream.waitFor((e) => e.event === "hello");
      expect(hello.data).toMatchObject({ tokenRequired: false, clusters: ["alpha", "beta"], startedAt: expect.any(String), heartbeatMs: 5000 });
      await stream.waitFor((e) => e.event === "status" && (e.data as { cluster: string }).cluster === "beta");
      const seen = stream.events.length;
      // An edit: a new revision reaches the stream.
      await writeDefinition(world, "alpha", definitionText(world, { nodes: ["l1", "l2"], contextLength: 512 }));
      const revision = await revisionOf(world, "alpha");
      const update = await stream.waitFor((e) => e.event === "status" && (e.data as { observedRevision: string }).observedRevision === revision, 30_000, seen);
      assertSchema(update.data, "status", "the streamed status");
      await waitForStatus(world, "alpha", (s) => s.observedRevision === revision);
      // A removed definition: the status file goes, and the stream says so.
      await rm(`${world.clustersDir}/beta.toml`);
      await stream.waitFor((e) => e.event === "removed" && (e.data as { cluster: string }).cluster === "beta");
      expect(((await getJson("api/clusters")).body as Array<{ cluster: string }>).map((s) => s.cluster)).toEqual(["alpha"]);
      for (const e of stream.events.filter((x) => x.event === "status")) assertSchema(e.data, "status", "a streamed status");
    } finally {
      stream.close();
    }
  });

  it("POST /api/plan: the planner's plan of a posted definition, in the status schema's shape, writing nothing", async () => {
    const before = (await readdir(world.clustersDir)).sort();
    const text = definitionText(world, { nodes: ["l1", "l2"], contextLength: 512 });
    const response = await fetch(new URL("api/plan?name=gamma", base), { method: "POST", body: text, headers: { "content-type": "application/toml" } });
    expect(response.status).toBe(200);
    const preview = (await response.json()) as {
      cluster: string;
      feasible: boolean;
      plan: { stages: unknown[] };
      model: { layers: number };
      errors: unknown[];
      issues: unknown[];
    };
    expect(preview).toMatchObject({ cluster: "gamma", feasible: true, errors: [], issues: [], model: { layers: 4 } });
    assertSchema(preview.plan, "plan", "the previewed plan");
    // The same definition text as alpha's: the same plan the daemon made for alpha.
    const alpha = (await getJson("api/clusters/alpha")).body as { plan: unknown };
    expect(preview.plan).toEqual(alpha.plan);
    expect((await readdir(world.clustersDir)).sort()).toEqual(before);
  });

  it("POST /api/plan: an invalid definition answers 422 with file:line:col issues; an empty body 400", async () => {
    const response = await fetch(new URL("api/plan?name=broken", base), { method: "POST", body: 'nodes = ["l1"]\n[model]\nid = 3\nbogus = true\n' });
    expect(response.status).toBe(422);
    const preview = (await response.json()) as { feasible: boolean; issues: string[] };
    expect(preview.feasible).toBe(false);
    expect(preview.issues.length).toBeGreaterThan(0);
    expect(preview.issues.every((i) => /^broken\.toml:\d+:\d+: /.test(i))).toBe(true);
    const empty = await fetch(new URL("api/plan", base), { method: "POST", body: "" });
    expect(empty.status).toBe(400);
    expect(((await empty.json()) as { error: { reason: string } }).error.reason).toBe("DashboardBadRequest");
  });

  it("POST /api/clusters/<name>/reconcile without a configured token: taken, as `shardctl reconcile` is", async () => {
    const response = await fetch(new URL("api/clusters/alpha/reconcile", base), { method: "POST" });
    expect(response.status).toBe(202);
    expect(await response.json()).toEqual({ cluster: "alpha", taken: true });
    const missing = await fetch(new URL("api/clusters/..%2Fescape/reconcile", base), { method: "POST" });
    expect(missing.status).toBe(404);
  });

  it("refuses other host names (DNS rebinding) and POSTs from other origins", async () => {
    const url = new URL(base);
    const raw = (path: string, headers: Record<string, string>, method = "GET") =>
      new Promise<number>((resolve, reject) => {
        const req = httpRequest({ host: url.hostname, port: url.port, path, method, headers }, (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        });
        req.on("error", reject);
        req.end();
      });
    expect(await raw("/api/clusters", { host: "attacker.example:80" })).toBe(403);
    expect(await raw("/api/clusters", { host: `localhost:${url.port}` })).toBe(200);
    expect(await raw("/api/clusters/alpha/reconcile", { host: url.host, origin: "http://attacker.example" }, "POST")).toBe(403);
  });

  it("serves the built page: no CDN, a strict content security policy, gzip", async () => {
    const page = await fetch(base);
    expect(page.status).toBe(200);
    expect(page.headers.get("content-security-policy")).toContain("default-src 'self'");
    const html = await page.text();
    expect(html).toContain('<div id="app">');
    expect(html).not.toMatch(/https?:\/\//);
    const script = /src="\.\/(assets\/[^"]+\.js)"/.exec(html)?.[1];
    expect(script).toBeDefined();
    const js = await fetch(new URL(script!, base), { headers: { "accept-encoding": "gzip" } });
    expect(js.status).toBe(200);
    expect(js.headers.get("content-encoding")).toBe("gzip");
    expect(js.headers.get("cache-control")).toContain("immutable");
  });
});
