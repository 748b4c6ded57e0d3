/** The shard-engine command line: --version, --help, and start-up errors that name their cause. */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { makeTestModel } from "../../src/planner/test-model/index.js";
import { killAll, requireBuild, spawnEngine } from "./support.js";

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
    expect(await run(["--version"])).toMatchObject({ code: 0, out: "shard-engine 0.1.0\n" });
    const help = await run(["--help"]);
    expect(help.code).toBe(0);
    expect(help.out).toContain("--distributed-config");
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
});
