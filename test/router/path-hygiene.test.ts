/**
 * Request paths through the embedded router (`shardctl router` from the build; run `npm run build`
 * first) to a real backend whose URL carries a path prefix (`…/api`), which records every request
 * it receives. Dot segments, raw or percent-encoded, must never carry a request past that prefix,
 * and malformed percent-encoding is the client's error (400, OpenAI-style), never a 500.
 */
import { request } from "node:http";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { stringify } from "yaml";
import { normaliseRequestPath } from "../../src/router/index.js";
import { allocateHosts } from "../support/test-world.js";
import { startOpenAIBackend, type OpenAIBackend } from "./support/openai-backend.js";
import { spawnRouter, type RouterProcess } from "./support/router-process.js";

describe("normaliseRequestPath", () => {
  const cases: Array<[target: string, path: string, query?: string]> = [
    ["/v1/chat/completions", "/v1/chat/completions"],
    ["/v1/../../admin", "/admin"],
    ["/v1/%2e%2e/%2E%2E/admin", "/admin"],
    ["/v1/.%2e/admin", "/admin"],
    ["/v1/chat/../chat/./completions", "/v1/chat/completions"],
    ["/v1/chat/%63ompletions?stream=%7B", "/v1/chat/completions", "?stream=%7B"],
    ["/v1/models/org%2fname", "/v1/models/org%2Fname"],
    ["/v1/a/..", "/v1/"],
    ["/..", "/"],
  ];
  for (const [target, path, query = ""] of cases) {
    it(`${target} → ${path}`, () => {
      expect(normaliseRequestPath(target)).toMatchObject({ ok: true, path, query });
    });
  }

  it("flags an encoded separator (kept encoded) so it is not forwarded", () => {
    expect(normaliseRequestPath("/v1/..%2f..%2fadmin")).toMatchObject({ ok: true, path: "/v1/..%2F..%2Fadmin", encodedSeparator: true });
    expect(normaliseRequestPath("/v1/a%5Cb")).toMatchObject({ ok: true, encodedSeparator: true });
  });

  for (const [target, message] of [
    ["/v1/chat/completions%zz", 'malformed percent-encoding "%zz" in the request path'],
    ["/v1/chat/completions%", 'malformed percent-encoding "%" in the request path'],
    ["/v1/x%4", 'malformed percent-encoding "%4" in the request path'],
    ["/v1/x?q=%g1", 'malformed percent-encoding "%g1" in the query'],
    ["/v1/%ff", "are not UTF-8"],
    ["/v1/a%00b", "encoded NUL"],
    ["/v1/a\\b", "must be percent-encoded"],
    ["http://example.test/v1/chat/completions", 'must start with "/"'],
  ] as const) {
    it(`refuses ${target}`, () => {
      const result = normaliseRequestPath(target);
      expect(result.ok).toBe(false);
      if (!result.ok) expect(result.message).toContain(message);
    });
  }
});

let dir: string;
let backend: OpenAIBackend;
let router: RouterProcess;

beforeAll(async () => {
  const [backendHost, routerHost] = (await allocateHosts(2)) as [string, string];
  dir = await mkdtemp(join(tmpdir(), "shardctl-router-paths-"));
  backend = await startOpenAIBackend("a", backendHost);
  const file = join(dir, "router.yaml");
  await writeFile(file, `server:\n  bind_address: "${routerHost}:0"\n${stringify({ backends: [{ name: "a", url: `${backend.url}/api`, models: ["m", "org/name"] }] })}`);
  router = await spawnRouter(file);
});
afterAll(async () => {
  await router?.stop();
  await backend?.close();
  await rm(dir, { recursive: true, force: true });
});

/** A request with `path` sent byte for byte (fetch would normalise it first). */
function raw(method: string, path: string, body?: object): Promise<{ status: number; json: Record<string, unknown> }> {
  const url = new URL(router.url);
  return new Promise((resolve, reject) => {
    const text = body === undefined ? undefined : JSON.stringify(body);
    const req = request(
      {
        host: url.hostname,
        port: url.port,
        method,
        path,
        headers: text === undefined ? {} : { "content-type": "application/json", "content-length": Buffer.byteLength(text) },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (chunk: Buffer) => chunks.push(chunk));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, json: JSON.parse(Buffer.concat(chunks).toString() || "{}") as Record<string, unknown> }));
      },
    );
    req.on("error", reject);
    req.end(text);
  });
}

const chatBody = { model: "m", messages: [{ role: "user", content: "hi" }] };

describe("the embedded router keeps every request inside the backend's prefix", () => {
  for (const path of ["/v1/../../admin", "/v1/%2e%2e/%2e%2e/admin", "/v1/%2E%2E/admin", "/v1/.%2e/.%2e/admin", "/v1/chat/../../../admin"]) {
    it(`POST ${path}: not routed (404), the backend receives nothing`, async () => {
      const before = backend.requests.length;
      const answer = await raw("POST", path, chatBody);
      expect(answer.status).toBe(404);
      expect(answer.json).toEqual({ error: { message: "no route for POST /admin", type: "invalid_request_error", param: null, code: "not_found" } });
      expect(backend.requests.length).toBe(before);
    });
  }

  it("POST /v1/..%2f..%2fadmin (an encoded separator): 400, the backend receives nothing", async () => {
    const before = backend.requests.length;
    const answer = await raw("POST", "/v1/..%2f..%2fadmin", chatBody);
    expect(answer.status).toBe(400);
    expect((answer.json.error as { code: string }).code).toBe("invalid_path");
    expect(backend.requests.length).toBe(before);
  });

  it("dot segments that stay under /v1/ are resolved, and the backend receives the clean path under its prefix", async () => {
    const answer = await raw("POST", "/v1/models/../chat/./%63ompletions", chatBody);
    expect(answer.status).toBe(200);
    expect(backend.requests.at(-1)?.path).toBe("/api/v1/chat/completions");
  });

  it("the query is forwarded as received", async () => {
    expect((await raw("POST", "/v1/chat/completions?trace=1%2B1", chatBody)).status).toBe(200);
    expect(backend.requests.at(-1)?.path).toBe("/api/v1/chat/completions?trace=1%2B1");
  });
});

describe("malformed percent-encoding is a 400 with an OpenAI-style body, never a 500", () => {
  for (const [method, path] of [
    ["POST", "/v1/chat/completions%zz"],
    ["POST", "/v1/chat/%"],
    ["POST", "/v1/chat/completions?x=%zz"],
    ["GET", "/v1/models/%zz"],
    ["GET", "/v1/models/%ff"],
  ] as const) {
    it(`${method} ${path}`, async () => {
      const before = backend.requests.length;
      const answer = await raw(method, path, method === "POST" ? chatBody : undefined);
      expect(answer.status).toBe(400);
      const error = answer.json.error as { message: string; type: string; param: unknown; code: string };
      expect(error).toMatchObject({ type: "invalid_request_error", param: null, code: "invalid_path" });
      expect(error.message.length).toBeGreaterThan(0);
      expect(backend.requests.length).toBe(before);
    });
  }

  it("GET /v1/models/org%2Fname still finds a model whose id holds a slash", async () => {
    const answer = await raw("GET", "/v1/models/org%2Fname");
    expect(answer.status).toBe(200);
    expect(answer.json.id).toBe("org/name");
  });

  it("the router still serves afterwards", async () => {
    expect((await raw("GET", "/health")).status).toBe(200);
  });
});
