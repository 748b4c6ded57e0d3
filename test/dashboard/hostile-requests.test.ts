// Requests a web page elsewhere can make to a dashboard on loopback without a token: the one action
// ("Reconcile now") and the plan preview must not be triggered by a page of another origin, whatever
// Origin it manages to send. Real daemon, real sockets, and real headless Chromium for the attack.
import { createServer, request as httpRequest, type Server } from "node:http";
import { readFile } from "node:fs/promises";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Daemon } from "../../src/reconciler/index.js";
import { launchChromium } from "../support/chromium.js";
import { definitionText, startInProcessDaemon, startWorld, waitForStatus, writeDefinition, type DaemonWorld } from "../reconciler/daemon-fixture.js";
import { enableDashboard } from "./support.js";

let world: DaemonWorld;
let daemon: Daemon;
let base: URL;

beforeAll(async () => {
  world = await startWorld();
  await enableDashboard(world);
  await writeDefinition(world, "alpha", definitionText(world, { nodes: ["l1"] }));
  daemon = await startInProcessDaemon(world);
  base = new URL(daemon.uiUrl!);
  await waitForStatus(world, "alpha", (s) => s.plan !== undefined);
  await daemon.whenIdle();
});

afterAll(async () => {
  await daemon?.stop();
  await world?.close();
});

/** A POST to the dashboard with exactly `headers` (Host is the dashboard's own): status and body. */
function post(path: string, headers: Record<string, string>, body = ""): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: base.hostname, port: base.port, path, method: "POST", headers: { host: base.host, ...headers } }, (res) => {
      let text = "";
      res.on("data", (d: Buffer) => (text += d.toString()));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body: text }));
    });
    req.on("error", reject);
    req.end(body);
  });
}

async function reconcilesLogged(): Promise<number> {
  const log = await readFile(join(world.root, "daemon.log"), "utf8");
  return log.split("\n").filter((line) => line.includes("reconcile requested from the dashboard")).length;
}

describe("cross-site requests to a dashboard without a token", () => {
  it('refuses "Origin: null" (a sandboxed frame, a data: or file: page) for reconcile and the plan preview', async () => {
    const reconcile = await post("/api/clusters/alpha/reconcile", { origin: "null" });
    expect(reconcile.status).toBe(403);
    expect(JSON.parse(reconcile.body)).toMatchObject({ error: { reason: "DashboardForbidden" } });
    const plan = await post("/api/plan?name=gamma&probe=true", { origin: "null", "content-type": "text/plain" }, definitionText(world, { nodes: ["l1"] }));
    expect(plan.status).toBe(403);
  });

  it("refuses a POST a browser marks cross-site even without an Origin, and still takes one from no page at all", async () => {
    expect((await post("/api/clusters/alpha/reconcile", { "sec-fetch-site": "cross-site" })).status).toBe(403);
    expect((await post("/api/clusters/alpha/reconcile", { origin: "not a url" })).status).toBe(403);
    expect((await post("/api/clusters/alpha/reconcile", {})).status).toBe(202);
    expect((await post("/api/clusters/alpha/reconcile", { origin: base.origin, "sec-fetch-site": "same-origin" })).status).toBe(202);
  });

  describe("in Chromium", () => {
    let browser: Browser;
    let attacker: Server;
    /** Resolves when the attacker's frame reports that its request was answered. */
    let answered: Promise<void>;

    beforeAll(async () => {
      browser = await launchChromium();
      let done!: () => void;
      answered = new Promise((resolve) => (done = resolve));
      // Another origin (another port): its page hides the request in a sandboxed frame, whose
      // origin is opaque, so Chromium sends "Origin: null"; the frame then tells its own server.
      attacker = createServer((req, res) => {
        if (req.url === "/done") {
          done();
          return res.writeHead(204).end();
        }
        const self = `http://${req.headers.host ?? ""}`;
        const target = new URL("api/clusters/alpha/reconcile", base).href;
        const script = `fetch(${JSON.stringify(target)}, { method: "POST", mode: "no-cors" }).finally(() => fetch(${JSON.stringify(`${self}/done`)}, { mode: "no-cors" }))`;
        const frame = `<script>${script}</script>`;
        res
          .writeHead(200, { "content-type": "text/html" })
          .end(`<!doctype html><iframe sandbox="allow-scripts" srcdoc="${frame.replace(/&/g, "&amp;").replace(/"/g, "&quot;")}"></iframe>`);
      });
      await new Promise<void>((resolve) => attacker.listen(0, "127.0.0.1", resolve));
    }, 120_000);

    afterAll(async () => {
      await browser?.close();
      await new Promise<void>((resolve) => (attacker ? attacker.close(() => resolve()) : resolve()));
    });

    it("a page of another origin cannot make the daemon reconcile", async () => {
      const before = await reconcilesLogged();
      const page = await browser.newPage();
      try {
        await page.goto(`http://127.0.0.1:${(attacker.address() as AddressInfo).port}/`);
        await answered;
      } finally {
        await page.close();
      }
      expect(await reconcilesLogged()).toBe(before);
    }, 30_000);
  });
});
