/**
 * The engine's version check on every node before a plan: an engine that answers late but within
 * the deadline is found; one that does not finish in time is retried (EngineNotAnswering, transient)
 * and its command does not outlive the deadline; one that fails says how — its exit status, or the
 * signal that killed it — never "exit undefined"; the coordinator's node is asked too. Real shell
 * scripts as the engine binary, on the two local nodes of a test world and a real sshd node. Run
 * `npm run build` first.
 */
import { execFile } from "node:child_process";
import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, expect, test } from "vitest";
import { nodeConfigOf, probeClusterNodes } from "../../src/cluster/index.js";
import { createNodeAccess, type NodeAccess } from "../../src/nodes/index.js";
import { sshNodeConfig, startSshdNodes, type SshdSet } from "../support/sshd.js";
import { loadSettings, parseCluster, type ClusterSpec, type Settings } from "../../src/spec/index.js";
import { definitionText, startWorld, type DaemonWorld } from "../reconciler/daemon-fixture.js";

const run = promisify(execFile);

let world: DaemonWorld;
let settings: Settings;
let nodes: NodeAccess[];
let sshd: SshdSet;
let remote: NodeAccess;

beforeAll(async () => {
  world = await startWorld();
  settings = await loadSettings(world.settingsFile);
  nodes = ["l1", "l2"].map((name) => createNodeAccess(nodeConfigOf(settings.nodes[name]!)));
  sshd = await startSshdNodes({ count: 1 });
  remote = createNodeAccess(sshNodeConfig(sshd, 0), { knownHostsPath: sshd.knownHostsPath });
  await mkdir(join(world.root, "bin"), { recursive: true });
});

afterAll(async () => {
  await Promise.all([...nodes, remote].map((node) => node.close()));
  await sshd.close();
  await world.close();
});

/** The stage nodes l1 and l2, and `coordinator` (default l1, a stage node). */
function cluster(coordinator: NodeAccess = nodes[0]!): { stages: NodeAccess[]; coordinator: NodeAccess } {
  return { stages: nodes, coordinator };
}

/** The cluster definition with `script` as its engine binary. */
async function specWith(name: string, script: string): Promise<ClusterSpec> {
  const binary = join(world.root, "bin", `${name}.sh`);
  await writeFile(binary, `#!/bin/sh\n${script}\n`, { mode: 0o755 });
  const text = definitionText(world, { nodes: ["l1", "l2"], binary, port: 39_599, portRange: "39600-39629" });
  const parsed = parseCluster(text, join(world.clustersDir, `${name}.toml`), settings);
  if (!parsed.ok) throw new Error(JSON.stringify(parsed.issues));
  return parsed.value;
}

test("an engine that answers late, within the deadline, is found on every node", async () => {
  const spec = await specWith("late", 'sleep 0.3; echo "shard-engine 9.9.9"');
  const facts = await probeClusterNodes(spec, cluster(), { versionDeadlineMs: 5_000 });
  expect([facts.l1?.engineVersion, facts.l2?.engineVersion]).toEqual(["shard-engine 9.9.9", "shard-engine 9.9.9"]);
});

test("an engine that does not answer in time is retried, not taken for a missing one, and its command is ended", async () => {
  // A marker in the command line finds the script's processes afterwards.
  const spec = await specWith("silent", "exec sleep 41.25");
  const started = Date.now();
  const error = await probeClusterNodes(spec, cluster(), { versionDeadlineMs: 1_000 }).then(
    () => undefined,
    (e: unknown) => e as { reason?: string; terminal?: boolean; message: string },
  );
  expect(Date.now() - started).toBeLessThan(15_000);
  expect(error?.reason).toBe("EngineNotAnswering");
  expect(error?.terminal ?? false).toBe(false);
  expect(error?.message).toMatch(/silent\.sh --version` did not finish within 1 s on l1, l2: .*will retry$/);
  const { stdout } = await run("ps", ["-eo", "args="]);
  expect(stdout.split("\n").filter((line) => line.startsWith("sleep 41.25"))).toEqual([]);
});

test("an engine that fails says how: its exit status, or the signal that killed it", async () => {
  const failing = await specWith("failing", "exit 3");
  await expect(probeClusterNodes(failing, cluster(), { versionDeadlineMs: 5_000 })).rejects.toMatchObject({
    reason: "EngineNotFound",
    message: expect.stringMatching(
      /fails on l1 \(exit 3\), l2 \(exit 3\): install shard-engine there or point \[engine\] binary at it, then run `shardctl reconcile failing`$/,
    ),
  });
  const killed = await specWith("killed", "kill -9 $$");
  const error = await probeClusterNodes(killed, cluster(), { versionDeadlineMs: 5_000 }).catch((e: unknown) => e as Error);
  expect((error as { reason?: string }).reason).toBe("EngineNotFound");
  expect((error as Error).message).toMatch(/fails on l1 \((killed by SIGKILL|exit 137)\), l2 \((killed by SIGKILL|exit 137)\)/);
  expect((error as Error).message).not.toContain("undefined");
});

test("a failure is quoted by the line that says what went wrong: a traceback's last, a usage error's first", async () => {
  const traceback = await specWith(
    "traceback",
    `echo 'Traceback (most recent call last):' >&2; echo '  File "<string>", line 1, in <module>' >&2; echo "ModuleNotFoundError: No module named 'mlx_lm'" >&2; exit 1`,
  );
  await expect(probeClusterNodes(traceback, cluster(), { versionDeadlineMs: 5_000 })).rejects.toMatchObject({
    reason: "EngineNotFound",
    message: expect.stringContaining("fails on l1 (exit 1: ModuleNotFoundError: No module named 'mlx_lm'), l2 (exit 1: ModuleNotFoundError"),
  });
  const usage = await specWith(
    "usage",
    `echo "error: unexpected argument '--version' found" >&2; echo >&2; echo 'Usage: usage.sh [OPTIONS]' >&2; echo "For more information, try '--help'." >&2; exit 2`,
  );
  await expect(probeClusterNodes(usage, cluster(), { versionDeadlineMs: 5_000 })).rejects.toMatchObject({
    message: expect.stringContaining("(exit 2: error: unexpected argument '--version' found)"),
  });
});

test("the coordinator's node is asked too when it is not a stage node: one without the engine is named before any launch", async () => {
  // The script is the engine on the local stage nodes and missing on the sshd node (where sshd sets SSH_CONNECTION).
  const spec = await specWith("coordinator-missing", '[ -z "$SSH_CONNECTION" ] || { echo "sh: 1: engine: not found" >&2; exit 127; }; echo "shard-engine 9.9.9"');
  const error = await probeClusterNodes(spec, cluster(remote), { versionDeadlineMs: 5_000 }).catch((e: unknown) => e as Error);
  expect(error).toMatchObject({ reason: "EngineNotFound", terminal: true });
  expect((error as Error).message).toMatch(/fails on node-1 \(exit 127: sh: 1: engine: not found\): install shard-engine there/);
  // Its figures are not a stage's budget: of the coordinator's node, only its engine's version is
  // a fact (the planner's version gates read it).
  const fine = await specWith("coordinator-present", 'echo "shard-engine 9.9.9"');
  const facts = await probeClusterNodes(fine, cluster(remote), { versionDeadlineMs: 5_000 });
  expect(Object.keys(facts).sort()).toEqual(["l1", "l2", "node-1"]);
  expect(facts["node-1"]).toEqual({ engineVersion: "shard-engine 9.9.9" });
  expect(facts.l1).toMatchObject({ engineVersion: "shard-engine 9.9.9", totalBytes: expect.any(Number) });
});
