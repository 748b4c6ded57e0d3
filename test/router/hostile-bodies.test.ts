/**
 * Request bodies a client controls, through the embedded router (`shardctl router` from the build;
 * run `npm run build` first) to a real backend whose entry rewrites `model` (upstream_model): a
 * body nested deeper than the rewrite can serialise is the client's 400, not the router's 500, and
 * an unknown model's name is not echoed back whole when it is megabytes long.
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
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
  it("a body nested 100,000 deep for a backend that rewrites `model`: 400 naming the backend, nothing forwarded", async () => {
    const before = backend.requests.length;
    const deep = "[".repeat(100_000) + "]".repeat(100_000);
    const { status, text } = await post(`{"model": "m", "messages": ${deep}}`);
    expect(status).toBe(400);
    expect(JSON.parse(text)).toMatchObject({
      error: {
        type: "invalid_request_error",
        code: "body_too_deep",
        message: "the request body is nested too deep for its `model` to be rewritten for backend a; send JSON nested at most a few thousand levels",
      },
    });
    expect(backend.requests.length).toBe(before);
    expect(router.logs().some((line) => line.msg === "router request failed")).toBe(false);
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
