/**
 * `/debug/stats` pairs each stage's answer with its request, in order. A stage that could not
 * compose its figures (no descriptor left to read its memory with, while a flood of connections
 * held them) answered nothing, so every later answer went to the request before it and
 * `/debug/stats` failed for good; now it answers the failure, and the next request is answered.
 */
import { execFile } from "node:child_process";
import { mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import { connect, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, expect, it } from "vitest";
import { makeTestModel } from "../../src/planner/test-model/index.js";
import { type Cluster, killAll, requireBuild, startCluster } from "./support.js";

const run = promisify(execFile);
let dir: string;
let cluster: Cluster;

beforeAll(async () => {
  requireBuild();
  dir = await mkdtemp(join(tmpdir(), "engine-stats-"));
  const modelDir = join(dir, "tiny-llama");
  await makeTestModel(modelDir, { layers: 4, hidden: 64, vocab: 320, seed: 5 });
  const tokenFile = join(dir, "token");
  await writeFile(tokenFile, "stats-token\n");
  cluster = await startCluster(modelDir, { stages: 2, dir, tokenFile });
});
afterAll(async () => {
  await cluster?.stop();
  await killAll();
  await rm(dir, { recursive: true, force: true });
});

it("a stage out of descriptors answers its failure; once it has them again, /debug/stats answers", async () => {
  const pid = cluster.stages[0]!.child.pid!;
  const open = (await readdir(`/proc/${pid}/fd`)).length;
  const soft = (await run("prlimit", ["--pid", String(pid), "--nofile", "--output=SOFT", "--noheadings"])).stdout.trim();
  // A few descriptors to spare (its soft limit), then connections to its transport port (held
  // until the handshake's deadline) take them.
  await run("prlimit", ["--pid", String(pid), `--nofile=${open + 4}:`]);
  const address = cluster.stageAddresses[0]!;
  const sockets: Socket[] = [];
  try {
    for (let i = 0; i < 12; i++) {
      const socket = connect(address.port, address.host);
      socket.on("error", () => undefined);
      sockets.push(socket);
    }
    await new Promise((r) => setTimeout(r, 500));
    const starved = await fetch(`${cluster.baseUrl}/debug/stats`);
    expect(starved.status).toBe(500);
    expect(await starved.text()).toMatch(/stage 0 could not give its figures: .*EMFILE/);
  } finally {
    for (const socket of sockets) socket.destroy();
    await run("prlimit", ["--pid", String(pid), `--nofile=${soft}:`]);
  }
  await new Promise((r) => setTimeout(r, 500));
  const answered = await fetch(`${cluster.baseUrl}/debug/stats`);
  expect(answered.status, await answered.clone().text()).toBe(200);
  expect(((await answered.json()) as { stages: unknown[] }).stages).toHaveLength(2);
}, 60_000);
