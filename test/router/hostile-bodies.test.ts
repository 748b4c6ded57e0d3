/**
 * Request bodies a client controls, through the embedded router (`shardctl router` from the build;
 * run `npm run build` first) to a real backend whose entry rewrites `model` (upstream_model): a
 * body nested however deep has its `model` rewritten in place and is forwarded as sent, and an
 * unknown model's name is not echoed back whole when it is megabytes long. Headers the
 * `Connection` header names are the connection's and go no further, in either direction.
 */
import { request } from "node:http";
import { connect, type Socket } from "node:net";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { stringify } from "yaml";
import { allocateHosts } from "../support/test-world.js";
import { startOpenAIBackend, type OpenAIBackend } from "./support/openai-backend.js";
import { spawnRouter, type RouterProcess } from "./support/router-process.js";

let dir: string;
let backend: OpenAIBackend;
let router: RouterProcess;

beforeAll(async () => {
  const [backendHost, routerHost] = (await allocateHosts(2)) as [string, string];
  dir = await mkdtemp(join(tmpdir(), "shardctl-router-bodies-"));
  backend = await startOpenAIBackend("a", backendHost);
  const file = join(dir, "router.yaml");
  await writeFile(
    file,
    `server:\n  bind_address: "${routerHost}:0"\n${stringify({ backends: [{ name: "a", url: backend.url, models: ["m"], upstream_model: "default_model" }] })}`,
  );
  router = await spawnRouter(file);
});
afterAll(async () => {
  await router?.stop();
  await backend?.close();
  await rm(dir, { recursive: true, force: true });
});

async function post(body: string): Promise<{ status: number; text: string }> {
  const response = await fetch(`${router.url}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body });
  return { status: response.status, text: await response.text() };
}

describe("hostile request bodies through the router", () => {
  it("a body nested 100,000 deep for a backend that rewrites `model`: forwarded with its model rewritten, the rest as sent", async () => {
    const deep = "[".repeat(100_000) + "]".repeat(100_000);
    const { status } = await post(`{"model": "m", "messages": ${deep}}`);
    expect(status).toBe(200);
    expect(backend.requests.at(-1)?.model).toBe("default_model");
    expect(router.logs().some((line) => line.msg === "router request failed")).toBe(false);
  });

  it("a body that is not JSON is told from one without a model; another method on a completion route is 405, as the coordinator answers", async () => {
    const broken = await post('{"model": "m", "messages": [');
    expect(broken.status).toBe(400);
    expect((JSON.parse(broken.text) as { error: { code: string } }).error.code).toBe("invalid_json");
    const modelless = await post('{"messages": []}');
    expect(modelless.status).toBe(400);
    expect((JSON.parse(modelless.text) as { error: { code: string } }).error.code).toBe("missing_model");
    const got = await fetch(`${router.url}/v1/chat/completions`);
    expect(got.status).toBe(405);
    expect(got.headers.get("allow")).toBe("POST");
    expect(((await got.json()) as { error: { code: string } }).error.code).toBe("method_not_allowed");
  });

  it("an unknown model named by 5 MB of text: 404 showing its first 200 characters and its length, not all of it", async () => {
    const { status, text } = await post(JSON.stringify({ model: "x".repeat(5_000_000), messages: [] }));
    expect(status).toBe(404);
    expect(text.length).toBeLessThan(1000);
    expect((JSON.parse(text) as { error: { message: string } }).error.message).toBe(`The model \`${"x".repeat(200)}… (5000000 characters)\` does not exist`);
  });

  it("still routes a well-formed request, its model rewritten", async () => {
    const { status } = await post(JSON.stringify({ model: "m", messages: [{ role: "user", content: "hi" }] }));
    expect(status).toBe(200);
    expect(backend.requests.at(-1)?.model).toBe("default_model");
  });
});

// Regression: the router dropped the fixed hop-by-hop headers but forwarded those a Connection
// header names (RFC 9110 §7.6.1): a client's per-connection fields reached the backend, and a
// backend's reached the client.
describe("headers named by Connection", () => {
  it("are not forwarded to the backend, nor back to the client; the others are", async () => {
    backend.answerHeaders = { connection: "x-backend-hop", "x-backend-hop": "backend's own", "x-backend-kept": "kept" };
    try {
      const body = JSON.stringify({ model: "m", messages: [{ role: "user", content: "hi" }] });
      const answer = await new Promise<{ status: number; headers: Record<string, unknown> }>((resolve, reject) => {
        const url = new URL(`${router.url}/v1/chat/completions`);
        const req = request(
          {
            host: url.hostname,
            port: url.port,
            path: url.pathname,
            method: "POST",
            headers: { "content-type": "application/json", connection: "keep-alive, X-Client-Hop", "x-client-hop": "client's own", "x-client-kept": "kept" },
          },
          (res) => {
            res.resume();
            res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers }));
          },
        );
        req.on("error", reject);
        req.end(body);
      });
      expect(answer.status).toBe(200);
      const seen = backend.requests.at(-1)!.headers;
      expect(seen["x-client-kept"]).toBe("kept");
      expect(seen["x-client-hop"]).toBeUndefined();
      expect(answer.headers["x-backend-kept"]).toBe("kept");
      expect(answer.headers["x-backend-hop"]).toBeUndefined();
    } finally {
      backend.answerHeaders = {};
    }
  });
});

// Regression: each request could hold up to 32 MiB of body with no bound on how many did at once;
// the embedded router runs in the daemon, so slow clients sending large bodies could run it out of
// memory.
describe("request bodies held at once", () => {
  it("past 256 MiB in all a request is answered 503 router_busy with Retry-After; what the others held is given back when they leave", async () => {
    const { hostname, port } = new URL(router.url);
    const pad = "x".repeat(30 * 1024 * 1024);
    const body = `{"model":"m","messages":[],"pad":"${pad}"}`;
    // A raw request sending `body`, all of it or all but its last byte (the router then holds it and
    // waits for the rest); `answer` resolves with what came back once its head has.
    const send = (complete: boolean): Promise<{ socket: Socket; answer: Promise<string> }> =>
      new Promise((resolve, reject) => {
        let text = "";
        let headDone: (head: string) => void = () => {};
        const answer = new Promise<string>((done) => (headDone = done));
        const socket = connect(Number(port), hostname, () => {
          socket.write(`POST /v1/chat/completions HTTP/1.1\r\nHost: ${hostname}:${port}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`);
          socket.write(complete ? body : body.slice(0, -1));
          resolve({ socket, answer });
        });
        socket.on("data", (d: Buffer) => {
          text += d.toString("latin1");
          if (text.includes("\r\n\r\n")) headDone(text);
        });
        socket.on("error", reject);
      });
    const held = await Promise.all(Array.from({ length: 9 }, () => send(false)));
    const refused = await Promise.race(held.map((h) => h.answer));
    expect(refused).toMatch(/^HTTP\/1\.1 503 /);
    expect(refused.toLowerCase()).toContain("retry-after: 1");
    for (const h of held) h.socket.destroy();
    // Given back: a body as large is taken again, and routed — once the router has seen them leave
    // (it may still be reading what they sent before they went).
    const deadline = Date.now() + 10_000;
    let answer: string;
    for (;;) {
      const later = await send(true);
      answer = await later.answer;
      later.socket.destroy();
      if (!answer.startsWith("HTTP/1.1 503 ") || Date.now() > deadline) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    expect(answer).toMatch(/^HTTP\/1\.1 200 /);

    // A declared length alone holds nothing: heads that promise 30 MiB each and send no byte of it
    // leave the budget to those that do send.
    const promised = await Promise.all(
      Array.from(
        { length: 12 },
        () =>
          new Promise<Socket>((resolve) => {
            const socket = connect(Number(port), hostname, () => {
              socket.write(`POST /v1/chat/completions HTTP/1.1\r\nHost: ${hostname}:${port}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`);
              resolve(socket);
            });
            socket.on("error", () => undefined);
          }),
      ),
    );
    try {
      const sent = await send(true);
      expect(await sent.answer).toMatch(/^HTTP\/1\.1 200 /);
      sent.socket.destroy();
    } finally {
      for (const socket of promised) socket.destroy();
    }
  }, 60_000);

  it("a declared length reserves nothing: 400 heads that promise 30 MiB each and send a few bytes leave the router's address space as it was", async () => {
    const { hostname, port } = new URL(router.url);
    const vmSizeKiB = async (): Promise<number> => Number(/^VmSize:\s+(\d+)/m.exec(await readFile(`/proc/${router.child.pid}/status`, "utf8"))?.[1]);
    const before = await vmSizeKiB();
    const sockets = await Promise.all(
      Array.from(
        { length: 400 },
        () =>
          new Promise<Socket>((resolve) => {
            const socket = connect(Number(port), hostname, () => {
              socket.write(
                `POST /v1/chat/completions HTTP/1.1\r\nHost: ${hostname}:${port}\r\nContent-Type: application/json\r\nContent-Length: ${30 * 1024 * 1024}\r\n\r\n{"model":"m",`,
              );
              resolve(socket);
            });
            socket.on("error", () => undefined);
          }),
      ),
    );
    try {
      // Let the router read every head and its first bytes.
      await new Promise((r) => setTimeout(r, 1_500));
      const grownMiB = ((await vmSizeKiB()) - before) / 1024;
      // 400 × 30 MiB = 12000 MiB when each declared length was reserved at once.
      expect(grownMiB).toBeLessThan(2_000);
    } finally {
      for (const socket of sockets) socket.destroy();
    }
  }, 60_000);
});
