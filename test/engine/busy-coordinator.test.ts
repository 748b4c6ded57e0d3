/**
 * A client cannot take a coordinator's pipeline down by keeping its event loop busy. Six bodies of
 * 4 MiB of tiny objects arriving together took seconds to parse on the coordinator's main thread:
 * its stage links' timers sent no heartbeat meanwhile and the stages, hearing nothing for 2.5 s,
 * exited 69; its /health went unanswered as long (the daemon's monitor takes three silent probes
 * for a death). Large bodies are now parsed on a thread of their own, and /health keeps answering.
 * A chat template that loops for seconds on one message's content still renders in place (a short
 * chat), but a helper thread writes the links' heartbeats meanwhile (`Pipeline.hold`): that request
 * waits, the pipeline lives. Real processes on loopback: a two-stage pipeline of shard-engine.
 */
import { readFile, writeFile, mkdtemp, rm } from "node:fs/promises";
import { connect, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { makeTestModel } from "../../src/planner/test-model/index.js";
import { killAll, postJson, requireBuild, startCluster, type Cluster } from "./support.js";

let dir: string;
let cluster: Cluster;

/**
 * Iterations of the template's loop on a message saying "slow": several seconds of rendering here
 * (450 000 took only 1.4 s on a fast machine, under the links' 2.5 s bound the test is about).
 */
const slowLoop = 1_200_000;

beforeAll(async () => {
  requireBuild();
  dir = await mkdtemp(join(tmpdir(), "engine-busy-coordinator-"));
  const modelDir = join(dir, "m");
  await makeTestModel(modelDir, { layers: 4, hidden: 64, seed: 11 });
  // A chat template that loops on one message's content, as a model's own template may.
  const configFile = join(modelDir, "tokenizer_config.json");
  const config = JSON.parse(await readFile(configFile, "utf8")) as { chat_template: string };
  config.chat_template = `{% for m in messages %}{% if m.content == 'slow' %}{% for i in range(${slowLoop}) %}{% endfor %}{% endif %}{% endfor %}${config.chat_template}`;
  await writeFile(configFile, JSON.stringify(config));
  cluster = await startCluster(modelDir, { stages: 2, dir });
}, 120_000);
afterAll(async () => {
  await cluster?.stop();
  await killAll();
  await rm(dir, { recursive: true, force: true });
});

/** Open a request with all of `body` but its last byte sent; `finish` sends it and resolves with the answer's status line. */
async function heldRequest(url: URL, path: string, body: Buffer): Promise<{ finish: () => Promise<string> }> {
  const socket: Socket = connect(Number(url.port), url.hostname);
  await new Promise<void>((resolve, reject) => socket.once("connect", resolve).once("error", reject));
  let answer = "";
  socket.on("data", (chunk: Buffer) => (answer += chunk.toString("latin1")));
  const ended = new Promise<void>((resolve) => socket.once("close", () => resolve()));
  socket.on("error", () => undefined);
  socket.write(`POST ${path} HTTP/1.1\r\nHost: ${url.host}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n`);
  socket.write(body.subarray(0, body.length - 1));
  return {
    finish: async () => {
      socket.write(body.subarray(body.length - 1));
      await ended;
      return answer.split("\r\n")[0] ?? "";
    },
  };
}

/** The stages and the coordinator still run, and the pipeline answers a completion. */
async function expectPipelineServes(): Promise<void> {
  for (const p of [cluster.coordinator, ...cluster.stages]) expect(p.child.exitCode, p.stderr()).toBeNull();
  const health = await fetch(`${cluster.baseUrl}/health`);
  expect(health.status).toBe(200);
  const r = await postJson(`${cluster.baseUrl}/v1/completions`, { prompt: "hello", max_tokens: 3 });
  expect(r.status, JSON.stringify(r.json)).toBe(200);
}

it("a chat template that loops for seconds on a message: that request waits, the pipeline lives", async () => {
  const started = performance.now();
  const slow = await postJson(`${cluster.baseUrl}/v1/chat/completions`, { messages: [{ role: "user", content: "slow" }], max_tokens: 2 });
  const tookMs = Math.round(performance.now() - started);
  console.log(`the looping template's request took ${tookMs} ms`);
  // Longer than the links' dead bound (2.5 s), or the test would say nothing of the heartbeats.
  expect(tookMs).toBeGreaterThan(2_500);
  expect(slow.status, JSON.stringify(slow.json)).toBe(200);
  await expectPipelineServes();
}, 120_000);

it("four 4 MiB bodies of tiny objects parsed back to back: the stages keep hearing from the coordinator", async () => {
  // Just under the coordinator's 4 MiB body limit: {"prompt":"x","max_tokens":1,"a":[{},{},…]}.
  const head = '{"prompt":"x","max_tokens":1,"a":[';
  const count = Math.floor((4 * 1024 * 1024 - head.length - 2) / 3);
  const body = Buffer.from(`${head}${new Array<string>(count).fill("{}").join(",")}]}`);
  expect(body.length).toBeLessThanOrEqual(4 * 1024 * 1024);
  const url = new URL(cluster.baseUrl);
  const held = await Promise.all(Array.from({ length: 4 }, () => heldRequest(url, "/v1/completions", body)));
  const started = performance.now();
  // /health asked every 200 ms while the bodies are parsed: the longest time without an answer.
  let answeredAt = started;
  let longestSilenceMs = 0;
  let parsing = true;
  const healthWatch = (async () => {
    while (parsing) {
      const r = await fetch(`${cluster.baseUrl}/health`).catch(() => undefined);
      if (r?.status === 200) {
        longestSilenceMs = Math.max(longestSilenceMs, performance.now() - answeredAt);
        answeredAt = performance.now();
      }
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  })();
  const statuses = await Promise.all(held.map((h) => h.finish()));
  parsing = false;
  await healthWatch;
  console.log(
    `four held bodies answered in ${Math.round(performance.now() - started)} ms, /health silent at most ${Math.round(longestSilenceMs)} ms: ${statuses.join(" | ")}`,
  );
  for (const status of statuses) expect(status).toMatch(/^HTTP\/1\.1 (200|400)/);
  // Three silent probes a second apart are a death to the daemon's monitor.
  expect(longestSilenceMs).toBeLessThan(2_000);
  await expectPipelineServes();
}, 120_000);
