/** `shardctl stage` and `shardctl nodes` end to end: the built CLI against real sshd nodes and the Hub stand-in. Run `npm run build` first. */
import { existsSync } from "node:fs";
import { mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { execa } from "execa";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { makeTestModel } from "../../src/planner/index.js";
import { startHubServer, type HubServer } from "../support/hub-server.js";
import { startSshdNodes, type SshdSet } from "../support/sshd.js";

const cli = resolve("dist/src/cli/shardctl.js");
const repo = "test-org/cli-llama";
const commit = "89abcdef0123456789abcdef0123456789abcdef";

let sshd: SshdSet;
let hub: HubServer;
let root: string;
let settingsFile: string;

beforeAll(async () => {
  if (!existsSync(cli)) throw new Error(`${cli} is missing: run \`npm run build\` before these tests`);
  root = await mkdtemp(join(tmpdir(), "shardctl-stage-cli-"));
  const modelDir = join(root, "model");
  await makeTestModel(modelDir, { layers: 4, shards: 2, seed: 5 });
  [sshd, hub] = await Promise.all([startSshdNodes({ count: 2 }), startHubServer({ repos: [{ repo, commit, dir: modelDir }] })]);
  settingsFile = join(root, "shardctl.toml");
  const nodes = sshd.nodes
    .map((n) =>
      [
        `[nodes.${n.name}]`,
        `host = "${n.host}"`,
        `port = ${n.port}`,
        `user = "${n.user}"`,
        `identity_file = "${sshd.identityFile}"`,
        `model_dir = "${n.modelDir}"`,
        `memory = "2GiB"`,
        `accelerator = "cpu"`,
      ].join("\n"),
    )
    .join("\n\n");
  await writeFile(
    settingsFile,
    `[distributed]\nenabled = true\n\n[hub]\nendpoint = "${hub.endpoint}"\n\n[ssh]\nknown_hosts = "${sshd.knownHostsPath}"\nconfig = "${join(root, "no-ssh-config")}"\n\n${nodes}\n`,
  );
  await writeFile(
    join(root, "clusters-tiny.toml"),
    [`nodes = ["node-1", "node-2"]`, "", "[model]", `id = "${repo}"`, `source = "hub"`, "context_length = 512", "", "[engine]", `kind = "reference"`, ""].join("\n"),
  );
});

afterAll(async () => {
  await hub?.close();
  await sshd?.close();
  if (root) await rm(root, { recursive: true, force: true });
});

describe("shardctl stage", () => {
  it("stages each node with only its stage's shard, then re-stages with no transfer", async () => {
    const args = [cli, "stage", join(root, "clusters-tiny.toml"), "--json", "--config", settingsFile];
    const first = await execa("node", args, { reject: false });
    expect(first.stderr).toBe("");
    expect(first.exitCode, first.stdout).toBe(0);
    const report = JSON.parse(first.stdout) as { commit: string; staged: Array<{ node: string; before: string; bytesTransferred: number }>; failed: unknown[] };
    expect(report.commit).toBe(commit);
    expect(report.failed).toEqual([]);
    // The two stage nodes, then the coordinator's node (the control machine), as the daemon stages them.
    expect(report.staged.map((s) => [s.node, s.before])).toEqual([
      ["node-1", "needs-download"],
      ["node-2", "needs-download"],
      ["local", "needs-download"],
    ]);
    // Stage 0 (layers 0-1) lives in shard 1 only; stage 1 (layers 2-3) spans both shards.
    const shards = async (i: number): Promise<string[]> => {
      const snapshot = join(sshd.nodes[i]!.modelDir, "models--test-org--cli-llama", "snapshots", commit);
      return (await readdir(snapshot)).filter((f) => f.endsWith(".safetensors")).sort();
    };
    expect(await shards(0)).toEqual(["model-00001-of-00002.safetensors"]);
    expect(await shards(1)).toEqual(["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]);
    expect(await readdir(join(sshd.nodes[0]!.modelDir, "models--test-org--cli-llama", "snapshots", commit))).toContain("tokenizer.json");
    // The coordinator's node (the state directory beside the settings file) gets the config and tokenizer, no weights.
    const coordinatorFiles = await readdir(join(root, ".shardctl", "models", "models--test-org--cli-llama", "snapshots", commit));
    expect(coordinatorFiles).toContain("tokenizer.json");
    expect(coordinatorFiles.filter((f) => f.endsWith(".safetensors"))).toEqual([]);

    hub.resetStats();
    const again = await execa("node", args, { reject: false });
    expect(again.exitCode, again.stdout).toBe(0);
    const second = JSON.parse(again.stdout) as { staged: Array<{ before: string; bytesTransferred: number }> };
    expect(second.staged.map((s) => [s.before, s.bytesTransferred])).toEqual([
      ["present", 0],
      ["present", 0],
      ["present", 0],
    ]);
    // Only the planner's safetensors header reads (HTTP Range) reached the Hub: no file was fetched.
    const fullFetches = Object.entries(hub.stats().bytesByPath).filter(([, bytes]) => bytes > 64 * 1024);
    expect(fullFetches).toEqual([]);
  });

  it("a plan that does not fit: --json still prints a report, nothing staged and the plan's errors, exit 1", async () => {
    const small = join(root, "small-nodes.toml");
    await writeFile(small, (await readFile(settingsFile, "utf8")).replaceAll('memory = "2GiB"', 'memory = "64KiB"'));
    const result = await execa("node", [cli, "stage", join(root, "clusters-tiny.toml"), "--json", "--config", small], { reject: false });
    expect(result.exitCode, result.stderr).toBe(1);
    const report = JSON.parse(result.stdout) as { cluster: string; staged: unknown[]; failed: unknown[]; errors: Array<{ reason: string; message: string }> };
    expect(report).toMatchObject({ cluster: "clusters-tiny", staged: [], failed: [] });
    expect(report.errors.length).toBeGreaterThan(0);
    for (const e of report.errors) expect(result.stderr).toContain(`${e.reason}: `);
  });

  it("a signal mid-transfer stops it at once (exit 130, said on stderr) and leaves no node's file lock behind", async () => {
    for (const n of sshd.nodes) await rm(join(n.modelDir, "models--test-org--cli-llama"), { recursive: true, force: true });
    const under = async (dir: string, suffix: string): Promise<string[]> =>
      ((await readdir(dir, { recursive: true }).catch(() => [])) as string[]).filter((f) => f.endsWith(suffix));
    const nodeEntries = async (suffix: string): Promise<string[]> => (await Promise.all(sshd.nodes.map((n) => under(n.modelDir, suffix)))).flat();
    hub.pace(50_000);
    try {
      const run = execa("node", [cli, "stage", join(root, "clusters-tiny.toml"), "--config", settingsFile], { reject: false });
      for (let i = 0; i < 300 && (await nodeEntries(".lock")).length === 0; i++) await new Promise((r) => setTimeout(r, 100));
      expect(await nodeEntries(".lock")).not.toEqual([]);
      run.kill("SIGINT");
      const result = await run;
      expect(result.exitCode, result.stderr).toBe(130);
      expect(result.stderr).toMatch(/staging stopped by SIGINT; partial files are kept/);
      // Gone when the CLI has exited: it waits for its locks' releases, and for the answer of any
      // lock-taking command the signal stopped it waiting for (that command may still make the lock).
      expect(await nodeEntries(".lock")).toEqual([]);
    } finally {
      hub.pace(undefined);
    }
  }, 90_000);
});

describe("shardctl nodes", () => {
  it("probes every registered node", async () => {
    const result = await execa("node", [cli, "nodes", "--json", "--config", settingsFile], { reject: false });
    expect(result.exitCode).toBe(0);
    const rows = JSON.parse(result.stdout) as Array<{ name: string; reachable: boolean; accelerator: string; memoryAvailableBytes: number; diskFreeBytes: number }>;
    expect(rows.map((r) => [r.name, r.reachable, r.accelerator])).toEqual([
      ["node-1", true, "cpu"],
      ["node-2", true, "cpu"],
    ]);
    expect(rows.every((r) => r.memoryAvailableBytes > 0 && r.diskFreeBytes > 0)).toBe(true);
    const text = await execa("node", [cli, "nodes", "--config", settingsFile], { reject: false });
    expect(text.stdout).toMatch(/^NODE\s+HOST\s+CAPABILITY/);
    expect(text.stdout).toContain("cpu linux/");
  });

  it("reports an unreachable node and exits 1", async () => {
    const bad = join(root, "bad.toml");
    await writeFile(
      bad,
      `[ssh]\nknown_hosts = "${sshd.knownHostsPath}"\n\n[nodes.gone]\nhost = "127.0.0.1"\nport = 1\nidentity_file = "${sshd.identityFile}"\nmodel_dir = "/tmp/x"\n`,
    );
    const result = await execa("node", [cli, "nodes", "--json", "--config", bad], { reject: false });
    expect(result.exitCode).toBe(1);
    expect(JSON.parse(result.stdout)).toMatchObject([{ name: "gone", reachable: false }]);
  });
});
