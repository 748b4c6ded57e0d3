/**
 * A model whose cluster is being relaunched answers 503 with Retry-After, not 404: the continuum
 * file registrar marks it (the file beside the router's YAML) and the embedded router — the built
 * `shardctl router`, a separate process as with a real deployment — reads the mark, until a backend
 * is registered for the model again or the mark expires. Run `npm run build` first.
 */
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse } from "yaml";
import { createRegistrar, readRouterConfig, relaunchFileOf, type Registrar } from "../../src/router/index.js";
import { allocateHosts } from "../support/test-world.js";
import { startOpenAIBackend, type OpenAIBackend } from "./support/openai-backend.js";
import { spawnRouter, type RouterProcess } from "./support/router-process.js";

let dir: string;
let file: string;
let backend: OpenAIBackend;
let backendHost: string;
let router: RouterProcess;
let registrar: Registrar;

const YAML = (routerHost: string): string => `# relaunch test router; comments stay
server:
  bind_address: "${routerHost}:0"
backends: []
`;

beforeAll(async () => {
  const hosts = (await allocateHosts(2)) as [string, string];
  backendHost = hosts[0];
  dir = await mkdtemp(join(tmpdir(), "shardctl-router-relaunch-"));
  file = join(dir, "router.yaml");
  await writeFile(file, YAML(hosts[1]));
  backend = await startOpenAIBackend("a", backendHost);
  registrar = createRegistrar({ kind: "continuum", config: file });
  await registrar.register({ name: "llama-pp", url: backend.url, models: ["m1"] });
  router = await spawnRouter(file);
});
afterAll(async () => {
  await router?.stop();
  await backend?.close();
  await rm(dir, { recursive: true, force: true });
});

async function chat(model: string): Promise<{ status: number; retryAfter: string | null; json: Record<string, unknown> }> {
  const response = await fetch(`${router.url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model, messages: [{ role: "user", content: "hi" }] }),
  });
  return { status: response.status, retryAfter: response.headers.get("retry-after"), json: (await response.json()) as Record<string, unknown> };
}

// Reloads follow file events (debounced): poll until `check` passes.
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

describe("a model whose cluster is being relaunched", () => {
  it("answers 503 with Retry-After between the death and the re-registration, then 200 again", async () => {
    expect((await chat("m1")).status).toBe(200);
    const yamlBefore = await readFile(file, "utf8");

    // What the daemon does on a death it will relaunch: mark, then deregister.
    await registrar.markRelaunching("m1", Date.now() + 60_000);
    expect(await readFile(file, "utf8")).toBe(yamlBefore);
    await registrar.deregister("llama-pp");

    await eventually(async () => {
      const answer = await chat("m1");
      expect(answer.status).toBe(503);
      expect(answer.retryAfter).toBe("2");
      expect(answer.json).toEqual({
        error: { message: "The model `m1` is being relaunched; retry in 2 s", type: "server_error", param: "model", code: "model_relaunching" },
      });
    });
    const model = await fetch(`${router.url}/v1/models/m1`);
    expect(model.status).toBe(503);
    expect(model.headers.get("retry-after")).toBe("2");

    // The official client retries a 503 (honouring Retry-After): a relaunch inside its retries is invisible to it.
    const client = new OpenAI({ baseURL: `${router.url}/v1`, apiKey: "test-key", maxRetries: 2 });
    const started = Date.now();
    const pending = client.chat.completions.create({ model: "m1", messages: [{ role: "user", content: "hi" }] });
    setTimeout(() => void registrar.register({ name: "llama-pp", url: backend.url, models: ["m1"] }), 300);
    const completion = await pending;
    expect(completion.choices[0]?.message.content).toBe("hello from a");
    expect(Date.now() - started).toBeGreaterThanOrEqual(1500);

    // Registration withdrew the mark: nothing is left beside the YAML.
    expect(existsSync(relaunchFileOf(file))).toBe(false);
    expect((await chat("m1")).status).toBe(200);
  });

  it("keeps the router's YAML what continuum-router reads: the marks live in their own file", async () => {
    await registrar.markRelaunching("m-yaml", Date.now() + 60_000);
    const yaml = await readFile(file, "utf8");
    expect(yaml).toContain("# relaunch test router; comments stay");
    expect(Object.keys(parse(yaml) as object).sort()).toEqual(["backends", "server"]);
    expect((await readRouterConfig(file)).backends.map((b) => b.name)).toEqual(["llama-pp"]);
    const marks = JSON.parse(await readFile(relaunchFileOf(file), "utf8")) as { relaunching: Record<string, { until: string }> };
    expect(Object.keys(marks.relaunching)).toEqual(["m-yaml"]);
    expect(Date.parse(marks.relaunching["m-yaml"]!.until)).toBeGreaterThan(Date.now());
    await registrar.clearRelaunching("m-yaml");
    expect(existsSync(relaunchFileOf(file))).toBe(false);
  });

  it("answers 404 again once the mark expires (a cluster that never came back)", async () => {
    await registrar.markRelaunching("m2", Date.now() + 1500);
    await eventually(async () => {
      const answer = await chat("m2");
      expect(answer.status).toBe(503);
      // Never longer than what is left on the mark.
      expect(Number(answer.retryAfter)).toBeLessThanOrEqual(2);
    });
    await eventually(async () => {
      const answer = await chat("m2");
      expect(answer.status).toBe(404);
      expect((answer.json.error as { code: string }).code).toBe("model_not_found");
    }, 4000);
  });

  it("answers 404 once the mark is cleared (the cluster stalled or was stopped)", async () => {
    await registrar.markRelaunching("m3", Date.now() + 60_000);
    await eventually(async () => expect((await chat("m3")).status).toBe(503));
    await registrar.clearRelaunching("m3");
    await eventually(async () => expect((await chat("m3")).status).toBe(404));
  });

  it("answers 503 rather than 502 while the dead backend is still listed (marked before the deregistration lands)", async () => {
    await registrar.register({ name: "dead-pp", url: `http://${backendHost}:1`, models: ["m4"] });
    await eventually(async () => expect((await chat("m4")).status).toBe(502));
    await registrar.markRelaunching("m4", Date.now() + 60_000);
    await eventually(async () => {
      const answer = await chat("m4");
      expect(answer.status).toBe(503);
      expect(answer.retryAfter).toBe("2");
    });
    await registrar.deregister("dead-pp");
    await registrar.clearRelaunching("m4");
  });

  it("a model never marked is still a plain 404", async () => {
    const answer = await chat("never-served");
    expect(answer.status).toBe(404);
    expect(answer.retryAfter).toBeNull();
  });
});

describe("a model whose cluster stalled", () => {
  it("answers 503 model_stalled naming the cluster and the reason, not 404, until a relaunch mark, a registration or its withdrawal", async () => {
    await registrar.markRelaunching("m5", Date.now() + 60_000);
    await registrar.markStalled("m5", { cluster: "tiny", reason: "RestartBudgetExhausted", since: Date.now() });
    const marks = JSON.parse(await readFile(relaunchFileOf(file), "utf8")) as { relaunching: object; stalled: Record<string, { cluster: string; reason: string }> };
    // A stalled model is not coming back: the relaunch mark is replaced.
    expect(marks.relaunching).toEqual({});
    expect(marks.stalled["m5"]).toMatchObject({ cluster: "tiny", reason: "RestartBudgetExhausted" });
    await eventually(async () => {
      const answer = await chat("m5");
      expect(answer.status).toBe(503);
      expect(answer.retryAfter).toBeNull();
      expect(answer.json).toEqual({
        error: {
          message:
            "The model `m5` is not served: its cluster `tiny` stalled (RestartBudgetExhausted) and comes back only when its definition changes or someone runs `shardctl reconcile tiny`; its status file says why",
          type: "server_error",
          param: "model",
          code: "model_stalled",
        },
      });
    });
    expect((await fetch(`${router.url}/v1/models/m5`)).status).toBe(503);
    // Another cluster's withdrawal leaves the mark; the cluster's own, or its relaunch, ends it.
    await registrar.clearStalled("m5", "other");
    expect((await chat("m5")).status).toBe(503);
    await registrar.markRelaunching("m5", Date.now() + 60_000);
    await eventually(async () => expect((await chat("m5")).json.error).toMatchObject({ code: "model_relaunching" }));
    await registrar.markStalled("m5", { cluster: "tiny", reason: "RestartBudgetExhausted", since: Date.now() });
    await registrar.register({ name: "m5-pp", url: backend.url, models: ["m5"] });
    await eventually(async () => expect((await chat("m5")).status).toBe(200));
    await registrar.deregister("m5-pp");
    await eventually(async () => expect((await chat("m5")).status).toBe(404));
    await registrar.markStalled("m5", { cluster: "tiny", reason: "LaunchFailed", since: Date.now() });
    await eventually(async () => expect((await chat("m5")).status).toBe(503));
    await registrar.clearStalled("m5", "tiny");
    await eventually(async () => expect((await chat("m5")).status).toBe(404));
    expect(existsSync(relaunchFileOf(file))).toBe(false);
    // The daemon's start withdraws every stalled mark (its first passes set again those still stalled).
    await registrar.markStalled("m6", { cluster: "gone", reason: "RestartBudgetExhausted", since: Date.now() });
    await registrar.clearAllStalled();
    expect(existsSync(relaunchFileOf(file))).toBe(false);
  });
});
