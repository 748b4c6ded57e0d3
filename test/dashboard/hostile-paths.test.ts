// Requests no page of the dashboard makes, sent byte for byte over a real socket (no client to
// normalise them) to a real daemon (in this process, plan-only) whose dashboard has a token: paths
// that climb out of the page's files, broken escapes, bodies and headers too big or not TOML, and
// the action without the token. Each is answered with the one error shape or Node's own refusal,
// never a file outside the page, and the dashboard answers normally afterwards.
import { connect } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Daemon } from "../../src/reconciler/index.js";
import { definitionText, startInProcessDaemon, startWorld, waitForStatus, writeDefinition, type DaemonWorld } from "../reconciler/daemon-fixture.js";
import { enableDashboard } from "./support.js";

const tokenEnv = "SHARDCTL_TEST_HOSTILE_PATHS_TOKEN";
const token = "hostile-paths-token-5c2e";

let world: DaemonWorld;
let daemon: Daemon;
let base: URL;

beforeAll(async () => {
  process.env[tokenEnv] = token;
  world = await startWorld();
  await enableDashboard(world, { tokenEnv });
  await writeDefinition(world, "alpha", definitionText(world, { nodes: ["l1"] }));
  daemon = await startInProcessDaemon(world);
  base = new URL(daemon.uiUrl!);
  await waitForStatus(world, "alpha", (s) => s.plan !== undefined);
}, 60_000);

afterAll(async () => {
  await daemon?.stop();
  await world?.close();
  delete process.env[tokenEnv];
});

interface Raw {
  status: number;
  headers: string;
  body: string;
}

/** `head` (request line and headers, without the blank line) and `body` as written, over a fresh connection. */
function raw(head: string, body = ""): Promise<Raw> {
  return new Promise((resolve, reject) => {
    const socket = connect(Number(base.port), base.hostname);
    let text = "";
    socket.on("data", (d: Buffer) => (text += d.toString("latin1")));
    // A server that answers before reading the whole body may reset the connection under the rest of it.
    socket.on("error", (error: NodeJS.ErrnoException) => (error.code === "EPIPE" || error.code === "ECONNRESET" ? undefined : reject(error)));
    socket.on("close", () => {
      const [headers = "", rest = ""] = text.split("\r\n\r\n", 2);
      resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(headers)?.[1] ?? 0), headers, body: rest });
    });
    // Written, not ended: a client that half-closes has its in-flight requests aborted by Node's server.
    socket.write(`${head}\r\nConnection: close\r\n\r\n${body}`);
  });
}

const get = (path: string): Promise<Raw> => raw(`GET ${path} HTTP/1.1\r\nHost: ${base.host}`);

describe("paths", () => {
  it("never serves a file outside the page's own, however the path climbs", async () => {
    for (const path of [
      "/../../../../etc/passwd",
      "/%2e%2e/%2e%2e/%2e%2e/%2e%2e/etc/passwd",
      "/assets/..%2f..%2f..%2fpackage.json",
      "/assets/..%5c..%5c..%5cpackage.json",
      "/..%00/index.html",
      "/%2e%2e%2fshardctl.toml",
      "/index.html%00.png",
    ]) {
      const answer = await get(path);
      expect(answer.status, path).toBe(404);
      expect(JSON.parse(answer.body), path).toMatchObject({ error: { reason: "DashboardNotFound" } });
      expect(answer.body, path).not.toMatch(/root:|"name": "shardctl"|\[daemon\]/);
      // The security headers ride on refusals too.
      expect(answer.headers, path).toMatch(/^content-security-policy: default-src 'self'/im);
      expect(answer.headers, path).toMatch(/^x-content-type-options: nosniff/im);
    }
  });

  it("a broken escape or a climbing name is no cluster", async () => {
    for (const path of ["/api/clusters/%", "/api/clusters/%E0%A4%A", "/api/clusters/..%2falpha", "/api/clusters/alpha%00"]) {
      const answer = await get(path);
      expect(answer.status, path).toBe(404);
      expect(JSON.parse(answer.body), path).toMatchObject({ error: { reason: "DashboardClusterNotFound" } });
    }
  });
});

describe("methods", () => {
  it("a method an endpoint does not take is 405 with the methods it does take in Allow", async () => {
    for (const [request, allow] of [
      ["DELETE /api/clusters/alpha", "GET, HEAD"],
      ["PUT /api/clusters", "GET, HEAD"],
      ["GET /api/clusters/alpha/reconcile", "POST"],
      ["GET /api/plan", "POST"],
      ["POST /api/events", "GET"],
      ["DELETE /index.html", "GET, HEAD"],
    ] as const) {
      const answer = await raw(`${request} HTTP/1.1\r\nHost: ${base.host}\r\nAuthorization: Bearer ${token}`);
      expect(answer.status, request).toBe(405);
      expect(answer.headers, request).toMatch(new RegExp(`^allow: ${allow}\r?$`, "im"));
      expect(JSON.parse(answer.body), request).toMatchObject({ error: { reason: "DashboardMethodNotAllowed" } });
    }
    // No endpoint at all is still 404, whatever the method.
    expect((await raw(`DELETE /api/nothing HTTP/1.1\r\nHost: ${base.host}`)).status).toBe(404);
  });
});

describe("bodies and headers", () => {
  const plan = (body: string, auth = `Bearer ${token}`): Promise<Raw> =>
    raw(`POST /api/plan HTTP/1.1\r\nHost: ${base.host}\r\nAuthorization: ${auth}\r\nContent-Type: application/toml\r\nContent-Length: ${Buffer.byteLength(body)}`, body);

  it("a plan body past 256 KiB is refused 413 without planning; text that is not TOML is 422 with located issues", async () => {
    const big = await plan("a".repeat(4 << 20));
    expect(big.status).toBe(413);
    expect(JSON.parse(big.body)).toMatchObject({ error: { reason: "DashboardBadRequest", message: "the body is larger than 262144 bytes" } });
    for (const body of ["\u0000\u0001\u00ff binary", "a = " + "[".repeat(100_000), "[[[[", '"unterminated = 1']) {
      const answer = await plan(body);
      expect(answer.status, body.slice(0, 20)).toBe(422);
      const preview = JSON.parse(answer.body) as { feasible: boolean; issues: string[] };
      expect(preview.feasible).toBe(false);
      expect(
        preview.issues.every((i) => /^preview\.toml:\d+:\d+: /.test(i)),
        JSON.stringify(preview.issues),
      ).toBe(true);
    }
  });

  it("a plan preview named past a DNS label's 63 characters is refused, its name cut short in the message", async () => {
    const body = definitionText(world, { nodes: ["l1"] });
    const ask = (name: string): Promise<Raw> =>
      raw(`POST /api/plan?name=${name} HTTP/1.1\r\nHost: ${base.host}\r\nAuthorization: Bearer ${token}\r\nContent-Length: ${Buffer.byteLength(body)}`, body);
    const long = await ask("a".repeat(5000));
    expect(long.status).toBe(400);
    const error = (JSON.parse(long.body) as { error: { reason: string; message: string } }).error;
    expect(error.reason).toBe("DashboardBadRequest");
    expect(error.message.length).toBeLessThan(300);
    expect((await ask("a".repeat(64))).status).toBe(400);
    expect((await ask("a".repeat(63))).status).toBe(200);
  });

  it("Node refuses what cannot be an HTTP request before the dashboard sees it, and the dashboard answers on", async () => {
    expect((await raw(`GET /api/clusters HTTP/1.1\r\nHost: ${base.host}\r\nX-Big: ${"y".repeat(20_000)}`)).status).toBe(431);
    expect((await raw(`POST /api/plan HTTP/1.1\r\nHost: ${base.host}\r\nContent-Length: abc`)).status).toBe(400);
    expect((await get(`/api/clusters/${"x".repeat(70_000)}`)).status).toBe(431);
    const after = await get("/api/clusters");
    expect(after.status).toBe(200);
    expect((JSON.parse(after.body) as Array<{ cluster: string }>).map((s) => s.cluster)).toEqual(["alpha"]);
  });
});

describe("without the token", () => {
  it("the action and the plan preview are refused 401, a big body too; reads stay open as documented", async () => {
    const reconcile = await raw(`POST /api/clusters/alpha/reconcile HTTP/1.1\r\nHost: ${base.host}`);
    expect(reconcile.status).toBe(401);
    expect(reconcile.headers).toMatch(/^www-authenticate: Bearer realm="shardctl"/im);
    expect(JSON.parse(reconcile.body)).toMatchObject({ error: { reason: "DashboardUnauthorized" } });
    for (const auth of ["Bearer wrong-token", `Basic ${Buffer.from(`x:${token}`).toString("base64")}`, `Bearer ${token} extra`]) {
      const answer = await raw(`POST /api/plan HTTP/1.1\r\nHost: ${base.host}\r\nAuthorization: ${auth}\r\nContent-Length: 1048576`, "a".repeat(1 << 20));
      expect(answer.status, auth).toBe(401);
    }
    expect((await get("/api/clusters/alpha")).status).toBe(200);
  });
});
