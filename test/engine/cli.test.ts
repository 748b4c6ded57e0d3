/** The shard-engine command line: --version, --help, and start-up errors that name their cause. */
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { delimiter, dirname, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { makeTestModel } from "../../src/planner/test-model/index.js";
import { bundledShardEngine, bundledShardEngineCommand, shardEngineNodeFlags } from "../../src/engines/index.js";
import { engineFlags } from "../../src/engine/index.js";
import { freePort, killAll, nextHost, postJson, requireBuild, spawnEngine, waitHealthy } from "./support.js";

let dir: string;
beforeAll(async () => {
  requireBuild();
  dir = await mkdtemp(join(tmpdir(), "engine-cli-"));
  await makeTestModel(join(dir, "m"), { layers: 2 });
});
afterAll(async () => {
  await killAll();
  await rm(dir, { recursive: true, force: true });
});

async function run(args: string[]): Promise<{ code: number | string; out: string; err: string }> {
  const p = spawnEngine(args);
  let out = "";
  p.child.stdout?.on("data", (c: Buffer) => (out += c.toString()));
  const code = await p.exited;
  return { code, out, err: p.stderr() };
}

describe("shard-engine command line", () => {
  it("--version and --help", async () => {
    expect(await run(["--version"])).toMatchObject({ code: 0, out: "shard-engine 0.3.0\n" });
    const help = await run(["--help"]);
    expect(help.code).toBe(0);
    expect(help.out).toContain("--distributed-config");
    // Every flag is explained below the synopsis, not only listed in it.
    const explained = help.out.slice(help.out.indexOf("\n\n"));
    const unexplained = Object.keys(engineFlags).filter((flag) => !["model", "version", "help"].includes(flag) && !explained.includes(`--${flag}`));
    expect(unexplained).toEqual([]);
  });

  it("usage errors exit 1 with one line", async () => {
    expect((await run(["--port", "80"])).err).toMatch(/-m <model-dir>` is required/);
    const bad = await run(["-m", join(dir, "m"), "--bogus"]);
    expect(bad.code).toBe(1);
    expect(bad.err).toMatch(/bogus/);
    expect((await run(["-m", join(dir, "m"), "--node-id", "x"])).err).toMatch(/go together/);
    expect((await run(["-m", join(dir, "m"), "--threads", "0"])).err).toContain("Expected `--threads` to be an integer between 1 and 1024, got `0`");
  });

  it("a node id missing from the cluster file is named with the file", async () => {
    const file = join(dir, "c.toml");
    await writeFile(
      file,
      `[cluster]\npipeline_parallel_size = 1\n[[nodes]]\nid = "c"\naddress = "127.0.0.1:1"\nrole = "hybrid"\n[[nodes]]\nid = "s"\naddress = "127.0.0.1:2"\nrole = "pipeline_stage"\nstage = 0\n`,
    );
    const r = await run(["-m", join(dir, "m"), "--distributed-config", file, "--node-id", "ghost"]);
    expect(r.code).toBe(1);
    expect(r.err).toContain(`${file}: node id "ghost" is not defined`);
  });

  // The control plane checks a config against its tensors before a launch; run by hand, the engine
  // must too: it sized its products from config.json and computed on misread weights, and a vocab
  // of 2^31 had it allocate 8 GiB of logits before it answered.
  it.each([
    ["hidden_size", 72, "tensor model.layers.0.self_attn.q_proj is [64, 64] but config.json says [64, 72] (num_attention_heads × head_dim, hidden_size)"],
    ["num_key_value_heads", 3, "tensor model.layers.0.self_attn.k_proj is [32, 64] but config.json says [48, 64] (num_key_value_heads × head_dim, hidden_size)"],
    ["vocab_size", 2 ** 31, "tensor model.embed_tokens is [320, 64] but config.json says [2147483648, 64] (vocab_size, hidden_size)"],
  ])("a config.json whose %s (%d) disagrees with the tensors: exit 1 naming the tensor and the fields, before serving", async (key, value, message) => {
    const model = join(dir, `config-${key}`);
    await makeTestModel(model, { layers: 2, hidden: 64 });
    const config = JSON.parse(await readFile(join(model, "config.json"), "utf8")) as Record<string, unknown>;
    await writeFile(join(model, "config.json"), JSON.stringify({ ...config, [key]: value, head_dim: 16 }));
    const host = await nextHost();
    const r = await run(["-m", model, "--host", host, "--port", String(await freePort(host))]);
    expect(r.code).toBe(1);
    expect(r.err).toContain(`${message}: the config is not this model's`);
  });

  it("runs with V8's young generation capped at 1 MiB per semi-space, whether launched under node or started as a program", async () => {
    // The cap only works on node's command line: the program's first lines exec node with the
    // flags the launch drivers pass.
    const [shebang, execLine] = (await readFile(bundledShardEngine, "utf8")).split("\n");
    expect(shebang).toBe("#!/bin/sh");
    expect(execLine).toBe(`//usr/bin/env true; exec node ${shardEngineNodeFlags.join(" ")} "$0" "$@"`);
    expect(bundledShardEngineCommand).toEqual([process.execPath, ...shardEngineNodeFlags, bundledShardEngine]);
    // Started as a program, `env` finds node on the PATH: this Node.js first.
    const asProgram = { ...process.env, PATH: `${dirname(process.execPath)}${delimiter}${process.env.PATH ?? ""}` };
    for (const [how, command] of [
      ["launched", bundledShardEngineCommand],
      ["as a program", [bundledShardEngine]],
    ] as const) {
      const host = await nextHost();
      const port = await freePort(host);
      const engine = spawnEngine(["-m", join(dir, "m"), "--host", host, "--port", String(port)], command, asProgram);
      const url = `http://${host}:${port}`;
      await waitHealthy(url, [engine]);
      // Enough requests to make megabytes of garbage: without the cap V8 grows its young
      // generation to several MiB after a few of them.
      for (let i = 0; i < 12; i++) expect((await postJson(`${url}/v1/completions`, { prompt: `request ${i}`, max_tokens: 24, temperature: 0 })).status).toBe(200);
      const stats = (await (await fetch(`${url}/debug/stats`)).json()) as { stages: Array<{ youngGeneration: number }> };
      expect(stats.stages[0]!.youngGeneration, how).toBeGreaterThan(0);
      expect(stats.stages[0]!.youngGeneration, how).toBeLessThanOrEqual(2 * 1024 * 1024);
      engine.child.kill("SIGTERM");
      await engine.exited;
    }
  });
});
