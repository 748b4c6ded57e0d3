/**
 * The router as a web page in the operator's browser could reach it, and a backend that answers
 * with a status HTTP has no place for. A router bound to loopback serves loopback Host names only
 * (a page on another name rebound to 127.0.0.1 would read its answers as its own), and a request that
 * changes something is refused when a browser marks it as sent from another site (a text/plain POST
 * needs no preflight: any page could run completions here). Clients that are not browsers send
 * neither mark and are served. A backend answering status 099 is a 502, and the router lives on
 * (the embedded one is the daemon's own process).
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { request } from "node:http";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { stringify } from "yaml";
import { allocateHosts } from "../support/test-world.js";
import { startOpenAIBackend, type OpenAIBackend } from "./support/openai-backend.js";
import { spawnRouter, type RouterProcess } from "./support/router-process.js";

let dir: string;
let backend: OpenAIBackend;
let odd: Server;
let router: RouterProcess;

beforeAll(async () => {
  const [backendHost, oddHost, routerHost] = (await allocateHosts(3)) as [string, string, string];
  dir = await mkdtemp(join(tmpdir(), "shardctl-router-browser-"));
  backend = await startOpenAIBackend("a", backendHost);
  // A backend whose every answer carries status 099.
  odd = createServer((socket) => {
    socket.once("data", () => socket.end("HTTP/1.1 099 Odd\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"));
    socket.on("error", () => undefined);
  });
  await new Promise<void>((resolve) => odd.listen(0, oddHost, resolve));
  const oddPort = (odd.address() as { port: number }).port;
  const file = join(dir, "router.yaml");
  await writeFile(
    file,
    `server:\n  bind_address: "${routerHost}:0"\n${stringify({
      backends: [
        { name: "a", url: backend.url, models: ["m"] },
        { name: "odd", url: `http://${oddHost}:${oddPort}`, models: ["odd"] },
      ],
    })}`,
  );
  router = await spawnRouter(file);
});
afterAll(async () => {
  await router?.stop();
  await backend?.close();
  await new Promise<void>((resolve) => (odd === undefined ? resolve() : odd.close(() => resolve())));
  await rm(dir, { recursive: true, force: true });
});

/** POST a chat completion for `model` with these extra headers (Host may be replaced). */
function post(headers: Record<string, string>, model = "m"): Promise<{ status: number; body: string }> {
  const url = new URL(`${router.url}/v1/chat/completions`);
  const body = JSON.stringify({ model, messages: [{ role: "user", content: "hi" }] });
  return new Promise((resolve, reject) => {
    const req = request(url, { method: "POST", headers: { "content-type": "text/plain", ...headers } }, (res) => {
      let text = "";
      res.on("data", (chunk: Buffer) => (text += chunk.toString()));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body: text }));
    });
    req.on("error", reject);
    req.end(body);
  });
}

describe("requests a web page could make", () => {
  it("a Host that is not a loopback name (DNS rebinding): 403, nothing forwarded", async () => {
    const before = backend.requests.length;
    const answer = await post({ host: `attacker.example:${new URL(router.url).port}`, origin: `http://attacker.example:${new URL(router.url).port}` });
    expect(answer.status).toBe(403);
    expect(JSON.parse(answer.body)).toMatchObject({
      error: { code: "forbidden", message: expect.stringContaining('serves loopback names only, not "attacker.example:') },
    });
    expect(backend.requests.length).toBe(before);
  });

  it("a POST from another site (its Origin, or Sec-Fetch-Site), or from a sandboxed page (Origin: null): 403, nothing forwarded", async () => {
    const before = backend.requests.length;
    const marks: Array<Record<string, string>> = [
      { origin: "https://evil.example" },
      { "sec-fetch-site": "cross-site" },
      { "sec-fetch-site": "same-site" },
      { origin: "null" },
    ];
    for (const headers of marks) {
      const answer = await post(headers);
      expect(answer.status, JSON.stringify(headers)).toBe(403);
    }
    expect(backend.requests.length).toBe(before);
  });

  it("a client that is not a browser (no Origin, no Sec-Fetch-Site), and a page of the router's own origin: served", async () => {
    expect((await post({})).status).toBe(200);
    expect((await post({ origin: new URL(router.url).origin, "sec-fetch-site": "same-origin" })).status).toBe(200);
    // Forwarded without the browser's marks: they name the router's origin, not the backend's, and a
    // backend that refuses foreign pages (shard-engine does) would refuse this one.
    const forwarded = backend.requests.at(-1)!.headers;
    expect(forwarded.origin).toBeUndefined();
    expect(forwarded["sec-fetch-site"]).toBeUndefined();
  });
});

describe("a backend answering a status HTTP has no place for", () => {
  it("status 099: a 502 naming it, and the router goes on serving", async () => {
    const answer = await post({}, "odd");
    expect(answer.status).toBe(502);
    expect(answer.body).toContain("status 99");
    expect(router.child.exitCode).toBeNull();
    expect((await post({})).status).toBe(200);
  });
});
