/**
 * The router's YAML as something other than a file to read: a FIFO (mkfifo) or a file over the
 * 4 MiB cap, at start-up (the built `shardctl router`; run `npm run build` first), on a hot reload
 * and in the registrar. Each must be refused at once, naming the file — a read that blocked on a
 * FIFO would never return, and a reload that never finishes never reloads again.
 */
import { execFileSync } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { stringify } from "yaml";
import { isShardctlError } from "../../src/errors/index.js";
import { createRegistrar } from "../../src/router/index.js";
import { allocateHosts } from "../support/test-world.js";
import { startOpenAIBackend, type OpenAIBackend } from "./support/openai-backend.js";
import { spawnRouter, type RouterProcess } from "./support/router-process.js";

let dir: string;
let routerHost: string;
let backend: OpenAIBackend;
const routers: RouterProcess[] = [];

beforeAll(async () => {
  const [backendHost, host] = (await allocateHosts(2)) as [string, string];
  routerHost = host;
  dir = await mkdtemp(join(tmpdir(), "shardctl-router-files-"));
  backend = await startOpenAIBackend("a", backendHost);
});
afterAll(async () => {
  await Promise.all(routers.map((router) => router.stop()));
  await backend?.close();
  await rm(dir, { recursive: true, force: true });
});

const configText = (): string => `server:\n  bind_address: "${routerHost}:0"\n${stringify({ backends: [{ name: "a", url: backend.url, models: ["m"] }] })}`;

/** How starting a router on `file` ends: the error it exited with, or "started" (stopped again at once). */
async function startOutcome(file: string, deadlineMs = 8000): Promise<unknown> {
  return spawnRouter(file, [], deadlineMs).then(
    async (router) => {
      await router.stop();
      return "started";
    },
    (error: unknown) => error,
  );
}

async function eventually(check: () => Promise<void> | void, deadlineMs = 5000): Promise<void> {
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

describe("the router's config file", () => {
  it("a FIFO at start-up: shardctl router exits 1 at once, naming the file", async () => {
    const fifo = join(dir, "pipe.yaml");
    execFileSync("mkfifo", [fifo]);
    const started = Date.now();
    expect(String(await startOutcome(fifo))).toMatch(/exited with 1[\s\S]*the router config is a FIFO \(named pipe\), not a regular file/);
    expect(Date.now() - started).toBeLessThan(8000);
  });

  it("over the 4 MiB cap at start-up: exits 1 with the size and the cap", async () => {
    const big = join(dir, "big.yaml");
    await writeFile(big, `${configText()}# ${"x".repeat(4 * 1024 * 1024)}\n`);
    expect(String(await startOutcome(big))).toMatch(/exited with 1[\s\S]*over the cap of 4194304 bytes \(4 MiB\)/);
  });

  it("replaced by a FIFO while running: the reload ends at once, keeps the last good config, and later reloads still work", async () => {
    const file = join(dir, "live.yaml");
    await writeFile(file, configText());
    const router = await spawnRouter(file);
    routers.push(router);
    const chat = async (model: string): Promise<number> =>
      (
        await fetch(`${router.url}/v1/chat/completions`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ model, messages: [{ role: "user", content: "hi" }] }),
        })
      ).status;
    expect(await chat("m")).toBe(200);

    await rm(file);
    execFileSync("mkfifo", [file]);
    await eventually(() => {
      const refused = router.logs().find((line) => line.msg === "router config not reloaded; keeping the last good config");
      expect(refused).toBeDefined();
      expect(JSON.stringify(refused)).toContain("the router config is a FIFO");
    });
    expect(await chat("m")).toBe(200);

    // A regular file again: the next reload takes it (nothing is stuck on the FIFO).
    await rm(file);
    await writeFile(file, `server:\n  bind_address: "${routerHost}:0"\n${stringify({ backends: [{ name: "a", url: backend.url, models: ["m", "m-new"] }] })}`);
    await eventually(async () => expect(await chat("m-new")).toBe(200));
  });

  it("the registrar refuses a FIFO config at once instead of blocking the daemon's pass", async () => {
    const fifo = join(dir, "registrar-pipe.yaml");
    execFileSync("mkfifo", [fifo]);
    const registrar = createRegistrar({ kind: "continuum", config: fifo });
    const started = Date.now();
    const error = await registrar.register({ name: "x", url: "http://127.0.0.1:9", models: ["m"] }).catch((e: unknown) => e);
    expect(Date.now() - started).toBeLessThan(2000);
    expect(isShardctlError(error, "RouterRegistrationFailed")).toBe(true);
    expect((error as Error).message).toContain("the router config is a FIFO");
  });
});
