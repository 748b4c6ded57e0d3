/**
 * The embedded router as users run it: `shardctl router --config <file>` from the build (run
 * `npm run build` first), in front of real OpenAI-format HTTP backends on loopback addresses.
 */
import { request } from "node:http";
import { mkdtemp, rename, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { stringify } from "yaml";
import type { BackendEntry } from "../../src/router/index.js";
import { allocateHosts } from "../support/test-world.js";
import { startOpenAIBackend, type OpenAIBackend } from "./support/openai-backend.js";
import { spawnRouter, type RouterProcess } from "./support/router-process.js";

let dir: string;
const backends: OpenAIBackend[] = [];
const routers: RouterProcess[] = [];
/** Loopback addresses leased to this file: the backends', the routers', backend c's, the taken one. */
let backendHost: string;
let routerHost: string;
let cHost: string;
let takenHost: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "shardctl-router-"));
  [backendHost, routerHost, cHost, takenHost] = (await allocateHosts(4)) as [string, string, string, string];
});
afterAll(async () => {
  await Promise.all(routers.map((router) => router.stop()));
  await Promise.all(backends.map((backend) => backend.close()));
  await rm(dir, { recursive: true, force: true });
});

/** `text` as a literal inside a RegExp (addresses are leased, so assertions build their patterns). */
const escaped = (text: string): string => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

async function backend(name: string, host = backendHost): Promise<OpenAIBackend> {
  const started = await startOpenAIBackend(name, host);
  backends.push(started);
  return started;
}

// Writes a config the way our registrar does (temp + rename), so the router sees one whole file.
async function writeConfig(file: string, entries: BackendEntry[], bind = `${routerHost}:0`): Promise<void> {
  const temp = `${file}.tmp`;
  await writeFile(temp, `# test router\nserver:\n  bind_address: "${bind}"\n${stringify({ backends: entries })}`);
  await rename(temp, file);
}

async function router(file: string): Promise<RouterProcess> {
  const started = await spawnRouter(file);
  routers.push(started);
  return started;
}

async function chat(url: string, model: string): Promise<{ status: number; json: Record<string, unknown> }> {
  const response = await fetch(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model, messages: [{ role: "user", content: "hi" }] }),
  });
  return { status: response.status, json: (await response.json()) as Record<string, unknown> };
}

function contentOf(json: Record<string, unknown>): string {
  const choices = json.choices as Array<{ message: { content: string } }>;
  return choices[0]?.message.content ?? "";
}

// Polls until `check` passes; reloads are asynchronous (debounced file watch).
async function eventually(check: () => Promise<void>, deadlineMs = 5000): Promise<void> {
  const end = Date.now() + deadlineMs;
  for (;;) {
    try {
      await check();
      return;
    } catch (error) {
      if (Date.now() > end) throw error;
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
  }
}

describe("shardctl router", () => {
  let url: string;
  let a: OpenAIBackend;
  let b: OpenAIBackend;
  let c: OpenAIBackend;

  beforeAll(async () => {
    a = await backend("a");
    b = await backend("b");
    c = await backend("c", cHost);
    const file = join(dir, "router.yaml");
    await writeConfig(file, [
      { name: "a", url: a.url, models: ["shared", "only-a"] },
      { name: "b", url: b.url, models: ["shared"] },
      { name: "c", url: c.url, models: ["weighted", "streamy"], weight: 3 },
      { name: "dead", url: `http://${backendHost}:1`, models: ["weighted", "nowhere"] },
    ]);
    url = (await router(file)).url;
  });

  it("listens where server.bind_address says", () => {
    expect(url).toMatch(new RegExp(`^http://${escaped(routerHost)}:\\d+$`));
  });

  it("answers /health and /healthz with 200", async () => {
    for (const path of ["/health", "/healthz"]) {
      const response = await fetch(`${url}${path}`);
      expect(response.status).toBe(200);
      expect(await response.json()).toEqual({ status: "ok" });
    }
  });

  it("answers /v1/models with the union of the backends' models in OpenAI list format", async () => {
    const response = await fetch(`${url}/v1/models`);
    const json = (await response.json()) as { object: string; data: Array<{ id: string; object: string }> };
    expect(json.object).toBe("list");
    expect(json.data.map((model) => model.id)).toEqual(["nowhere", "only-a", "shared", "streamy", "weighted"]);
    expect(json.data.every((model) => model.object === "model")).toBe(true);
  });

  it("routes by model and round-robins among the backends listing it", async () => {
    const seen: string[] = [];
    for (let i = 0; i < 6; i++) {
      const { status, json } = await chat(url, "shared");
      expect(status).toBe(200);
      seen.push(contentOf(json));
    }
    expect(seen.filter((text) => text === "hello from a")).toHaveLength(3);
    expect(seen.filter((text) => text === "hello from b")).toHaveLength(3);
    expect(seen[0]).not.toBe(seen[1]);
    const only = await chat(url, "only-a");
    expect(contentOf(only.json)).toBe("hello from a");
  });

  it("routes /v1/completions too", async () => {
    const response = await fetch(`${url}/v1/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "only-a", prompt: "x" }),
    });
    const json = (await response.json()) as { object: string };
    expect(json.object).toBe("text_completion");
    expect(a.requests.at(-1)?.path).toBe("/v1/completions");
  });

  it("answers an unknown model with an OpenAI-style 404", async () => {
    const { status, json } = await chat(url, "no-such-model");
    expect(status).toBe(404);
    expect(json).toMatchObject({ error: { code: "model_not_found", type: "invalid_request_error", param: "model" } });
  });

  it("skips an unreachable backend, and answers 502 when none is reachable", async () => {
    const before = c.requests.length;
    for (let i = 0; i < 4; i++) expect((await chat(url, "weighted")).status).toBe(200);
    expect(c.requests.length - before).toBe(4);
    const { status, json } = await chat(url, "nowhere");
    expect(status).toBe(502);
    expect(json).toMatchObject({ error: { code: "backend_unreachable" } });
  });

  it("streams chunks through as they arrive, before the backend has finished", async () => {
    c.holdStream = true;
    try {
      const first = await new Promise<string>((resolve, reject) => {
        // A buffering proxy would send nothing until release(): fail fast instead of hanging.
        const timer = setTimeout(() => reject(new Error("no chunk within 3 s: the router buffers the stream")), 3000);
        const req = request(`${url}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" } }, (res) => {
          expect(res.headers["content-type"]).toBe("text/event-stream");
          res.once("data", (chunk: Buffer) => {
            clearTimeout(timer);
            resolve(chunk.toString());
            res.destroy();
          });
        });
        req.on("error", reject);
        req.end(JSON.stringify({ model: "streamy", stream: true, messages: [] }));
      });
      // The backend is still holding the rest of the stream, so this chunk was not buffered.
      expect(first).toMatch(/^data: \{.*"content":"hello"/);
      // Our disconnect reaches the backend as an aborted stream.
      await eventually(async () => expect(c.aborted).toBe(1));
    } finally {
      c.holdStream = false;
      c.release();
    }
  });

  it("works with the official openai client, streaming and not", async () => {
    const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: "test-key", maxRetries: 0 });
    const completion = await client.chat.completions.create({ model: "streamy", messages: [{ role: "user", content: "hi" }] });
    expect(completion.choices[0]?.message.content).toBe("hello from c");
    expect(c.requests.at(-1)?.authorization).toBe("Bearer test-key");

    const stream = await client.chat.completions.create({ model: "streamy", stream: true, messages: [{ role: "user", content: "hi" }] });
    let text = "";
    let chunks = 0;
    for await (const chunk of stream) {
      chunks += 1;
      text += chunk.choices[0]?.delta.content ?? "";
    }
    expect(text).toBe("hello from c");
    expect(chunks).toBe(4);

    const models = await client.models.list();
    expect(models.data.map((model) => model.id)).toContain("streamy");
    await expect(client.chat.completions.create({ model: "missing", messages: [] })).rejects.toMatchObject({ status: 404 });
  });
});

describe("shardctl router reloads", () => {
  it("routes to a backend added to the file, stops routing to a removed one, and keeps the last good config on broken YAML", async () => {
    const x = await backend("x");
    const y = await backend("y");
    const file = join(dir, "reload.yaml");
    await writeConfig(file, [{ name: "x", url: x.url, models: ["m1"] }]);
    const running = await router(file);
    expect((await chat(running.url, "m2")).status).toBe(404);

    // Add a backend → routed.
    await writeConfig(file, [
      { name: "x", url: x.url, models: ["m1"] },
      { name: "y", url: y.url, models: ["m2"] },
    ]);
    await eventually(async () => expect(contentOf((await chat(running.url, "m2")).json)).toBe("hello from y"));

    // A broken file is logged and ignored.
    await writeFile(file, "backends: [ {name: oops\n");
    await eventually(async () => expect(running.logs().some((line) => line.msg === "router config not reloaded; keeping the last good config")).toBe(true));
    expect(contentOf((await chat(running.url, "m2")).json)).toBe("hello from y");

    // Remove it → 404.
    await writeConfig(file, [{ name: "x", url: x.url, models: ["m1"] }]);
    await eventually(async () => expect((await chat(running.url, "m2")).status).toBe(404));
    expect(contentOf((await chat(running.url, "m1")).json)).toBe("hello from x");

    expect(await running.stop()).toBe(0);
  });

  it("exits 1 naming the address when bind_address is taken", async () => {
    const taken = await backend("taken", takenHost);
    const file = join(dir, "taken.yaml");
    await writeConfig(file, [], taken.url.slice("http://".length));
    await expect(spawnRouter(file)).rejects.toThrow(new RegExp(`exited with 1[\\s\\S]*cannot listen on ${escaped(takenHost)}`));
  });

  it("exits 1 with a message when the config is broken at start", async () => {
    const file = join(dir, "broken.yaml");
    await writeFile(file, "backends:\n  - name: a\n    url: not a url\n");
    await expect(spawnRouter(file)).rejects.toThrow(/exited with 1[\s\S]*RouterConfig|exited with 1[\s\S]*url/);
  });
});
