/**
 * `source = "path"` never copies files, so before a launch every stage node must already hold each
 * weight file its stage loads, at the model's size: an engine may leave a tensor whose file is
 * missing at random values without a word (mlx-lm does). Here the nodes (real sshd) see a copy of
 * the model that lacks a shard, while `shardctl stage` plans from the whole model: it runs in a
 * mount namespace of its own (util-linux `unshare`, as root) where the whole model is bind-mounted
 * over the same path.
 */
import { spawn } from "node:child_process";
import { cp, mkdir, rm } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, expect, test } from "vitest";
import { makeTestModel } from "../../src/planner/index.js";
import { freePort, freePortRange, shardctlJs, startWorld, writeDefinition, type DaemonWorld } from "../reconciler/daemon-fixture.js";

let world: DaemonWorld;
let whole: string;
let partial: string;

beforeAll(async () => {
  if (process.getuid?.() !== 0) throw new Error("this test bind-mounts in a mount namespace of its own: run it as root");
  world = await startWorld({ sshNodes: 2 });
  whole = join(world.root, "whole-model");
  partial = join(world.root, "path-model");
  await makeTestModel(whole, { layers: 4, shards: 2, hidden: 64, heads: 4, kvHeads: 2, vocab: 320, seed: 5 });
  await mkdir(partial, { recursive: true });
  await cp(whole, partial, { recursive: true });
  await rm(join(partial, "model-00002-of-00002.safetensors"));
});

afterAll(async () => {
  await world?.close();
});

/** `shardctl <args>` in a mount namespace where `partial` shows `whole`. */
function runSeeingWholeModel(args: string[]): Promise<{ code: number | null; out: string }> {
  const command = ["mount", "--bind", whole, partial].join(" ") + ' && exec "$@"';
  return new Promise((done) => {
    const child = spawn(
      "unshare",
      [
        "--mount",
        "--propagation",
        "private",
        "sh",
        "-c",
        command,
        "sh",
        process.execPath,
        shardctlJs,
        ...args,
        "--config",
        world.settingsFile,
        "--dir",
        world.clustersDir,
      ],
      { cwd: world.root, stdio: ["ignore", "pipe", "pipe"] },
    );
    let out = "";
    child.stdout.on("data", (d: Buffer) => (out += d.toString()));
    child.stderr.on("data", (d: Buffer) => (out += d.toString()));
    child.once("close", (code) => done({ code, out }));
  });
}

test("a stage node without a weight file its stage loads is refused at staging, naming the node and the file", async () => {
  const text = [
    'nodes = ["n1", "n2"]',
    "[model]",
    `id = ${JSON.stringify(partial)}`,
    'source = "path"',
    "context_length = 256",
    "[engine]",
    'kind = "reference"',
    "[transport]",
    `port_range = "${await freePortRange(["127.0.0.1", ...world.hosts.values()])}"`,
    "[coordinator]",
    `port = ${await freePort()}`,
    "",
  ].join("\n");
  await writeDefinition(world, "pathy", text);
  const result = await runSeeingWholeModel(["stage", "pathy"]);
  expect(result.code, result.out).toBe(1);
  expect(result.out).toMatch(/ModelFilesMissing/);
  expect(result.out).toMatch(/lacks what this node's stage loads: model-00002-of-00002\.safetensors \(missing\)/);
});
