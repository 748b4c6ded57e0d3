/**
 * A coordinator whose event loop a client keeps busy is still alive to its stages. Parsing a
 * request body, rendering the model's chat template and tokenizing a short prompt run on the
 * coordinator's main thread; while they run, its stage links' own timers cannot send heartbeats, and
 * the stages declare a peer dead after 2.5 s of silence. Six bodies of 4 MiB of tiny objects
 * arriving together take seconds to parse here, and a chat template that loops for seconds on one
 * message's content holds the loop as long: without a helper thread writing the heartbeats meanwhile
 * (`Pipeline.hold`), the stages exited 69 and every request failed with the pipeline broken.
 * Real processes on loopback: a two-stage pipeline of shard-engine.
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

/** Iterations of the template's loop on a message saying "slow": several seconds of rendering here. */
const slowLoop = 400_000;

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
  expect(slow.status, JSON.stringify(slow.json)).toBe(200);
  await expectPipelineServes();
}, 120_000);

it("six 4 MiB bodies of tiny objects parsed back to back: the stages keep hearing from the coordinator", async () => {
  // Just under the coordinator's 4 MiB body limit: {"prompt":"x","max_tokens":1,"a":[{},{},…]}.
  const head = '{"prompt":"x","max_tokens":1,"a":[';
  const count = Math.floor((4 * 1024 * 1024 - head.length - 2) / 3);
  const body = Buffer.from(`${head}${new Array<string>(count).fill("{}").join(",")}]}`);
  expect(body.length).toBeLessThanOrEqual(4 * 1024 * 1024);
  const url = new URL(cluster.baseUrl);
  const held = await Promise.all(Array.from({ length: 6 }, () => heldRequest(url, "/v1/completions", body)));
  const started = performance.now();
  const statuses = await Promise.all(held.map((h) => h.finish()));
  console.log(`six held bodies answered in ${Math.round(performance.now() - started)} ms: ${statuses.join(" | ")}`);
  for (const status of statuses) expect(status).toMatch(/^HTTP\/1\.1 (200|400)/);
  await expectPipelineServes();
}, 120_000);
