/**
 * A node whose SSH sessions run in a memory cgroup (a container, a user slice with MemoryMax) may
 * use no more than its limit, whatever /proc/meminfo says of the machine: the probe reports memory
 * capped by the least limit among the session's cgroups, so plans are budgeted with what an engine
 * started there may use before the OOM killer ends it; and a process the OOM killer ends there is
 * said to be out of memory, not only killed by SIGKILL. A real sshd, moved into a memory cgroup of
 * its own with a 96 MiB limit.
 */
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdir, readFile, rmdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, expect, test } from "vitest";
import { askExit } from "../../src/launch/index.js";
import { NodePool, type NodeAccess } from "../../src/nodes/index.js";
import { probeNode } from "../../src/nodes/probe.js";
import { sshNodeConfig, startSshdNodes, type SshdSet } from "../support/sshd.js";

const run = promisify(execFile);
const limitBytes = 96 * 1024 * 1024;

let set: SshdSet;
let group: string | undefined;
let pool: NodePool;
let node: NodeAccess;

/** A new memory cgroup under this process's own (cgroup v1's memory controller, or v2's tree) limited to `bytes`. */
async function makeMemoryCgroup(bytes: number): Promise<string> {
  const lines = (await readFile("/proc/self/cgroup", "utf8")).split("\n");
  const v1 = lines.find((l) => /^\d+:([^:]*,)?memory(,[^:]*)?:/.test(l));
  const name = `shardctl-test-${process.pid}`;
  if (v1 !== undefined && existsSync("/sys/fs/cgroup/memory")) {
    const dir = join("/sys/fs/cgroup/memory", v1.replace(/^\d+:[^:]*:/, ""), name);
    await mkdir(dir);
    await writeFile(join(dir, "memory.limit_in_bytes"), String(bytes));
    return dir;
  }
  const v2 = lines.find((l) => l.startsWith("0::"));
  if (v2 === undefined) throw new Error("this machine has no memory cgroup controller (neither cgroup v1's memory nor cgroup v2) for this test");
  const dir = join("/sys/fs/cgroup", v2.slice(3), name);
  await mkdir(dir);
  await writeFile(join(dir, "memory.max"), String(bytes)).catch((error: Error) => {
    throw new Error(`cgroup v2's memory controller is not enabled for ${dir} (its parent's cgroup.subtree_control): ${error.message}`);
  });
  return dir;
}

beforeAll(async () => {
  set = await startSshdNodes({ count: 1 });
  group = await makeMemoryCgroup(limitBytes);
  // Sessions the listener forks from now on start in the cgroup.
  await writeFile(join(group, "cgroup.procs"), String(set.nodes[0]!.pid));
  pool = new NodePool({ knownHostsPath: set.knownHostsPath, sshConfigPath: join(set.root, "no-config") });
  node = pool.get(sshNodeConfig(set, 0));
}, 60_000);

afterAll(async () => {
  await pool?.close();
  await set?.close();
  // The cgroup empties once its sshd and sessions are gone.
  if (group !== undefined) {
    for (let i = 0; i < 50 && existsSync(group); i++) await rmdir(group).catch(() => new Promise((r) => setTimeout(r, 100)));
  }
});

test("memory is capped by the session's cgroup limit, and says so", async () => {
  const probe = await probeNode(node);
  expect(probe.error).toBeUndefined();
  const meminfo = await readFile("/proc/meminfo", "utf8");
  const machineKb = Number(/^MemTotal:\s+(\d+)/m.exec(meminfo)?.[1]);
  expect(machineKb * 1024).toBeGreaterThan(limitBytes);
  expect(probe.cgroupMemoryLimitBytes).toBe(limitBytes);
  expect(probe.memoryTotalBytes).toBe(limitBytes);
  expect(probe.memoryAvailableBytes).toBeGreaterThan(0);
  expect(probe.memoryAvailableBytes).toBeLessThanOrEqual(limitBytes);
});

test("a process the OOM killer ends is said to be out of memory, naming the node", async () => {
  const runDir = join(set.nodes[0]!.modelDir, ".shardctl", "run", "oom");
  await mkdir(runDir, { recursive: true });
  const exitFile = join(runDir, "stage-0.exit");
  const logFile = join(runDir, "stage-0.log");
  // Grows past the cgroup's 96 MiB, touching every page, until the kernel kills it.
  const grow = "const kept = []; for (;;) kept.push(Buffer.alloc(8 << 20, 1));";
  const started = await node.startDetached([process.execPath, "-e", grow], { logFile, exitStatusFile: exitFile });
  const deadline = Date.now() + 30_000;
  while (!existsSync(exitFile) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
  expect((await readFile(exitFile, "utf8")).trim()).toBe("137");
  const { words } = await askExit(node, { role: "stage", index: 0, node: "n5", pid: started.pid, startTime: started.startTime, runDir, logFile, exitFile });
  expect(words).toMatch(
    /^killed by SIGKILL \(status 137\): out of memory, most likely — the kernel's OOM killer killed 1 process in its memory cgroup on n5 while it ran/,
  );
  expect(words).toContain("[nodes.n5] memory_limit");
}, 60_000);

test("a SIGKILL from outside while no OOM kill happens is said as it is", async () => {
  const runDir = join(set.nodes[0]!.modelDir, ".shardctl", "run", "killed");
  await mkdir(runDir, { recursive: true });
  const exitFile = join(runDir, "stage-0.exit");
  const logFile = join(runDir, "stage-0.log");
  const started = await node.startDetached(["sleep", "60"], { logFile, exitStatusFile: exitFile });
  // The sleep, not its wrapper: the wrapper's child (once the wrapper has started it).
  let sleeper = "";
  for (let i = 0; i < 100 && sleeper === ""; i++) {
    sleeper = (await run("pgrep", ["-P", String(started.pid), "sleep"]).catch(() => ({ stdout: "" }))).stdout.trim();
    if (sleeper === "") await new Promise((r) => setTimeout(r, 50));
  }
  await run("kill", ["-KILL", sleeper]);
  const deadline = Date.now() + 10_000;
  while (!existsSync(exitFile) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
  const { words } = await askExit(node, { role: "stage", index: 0, node: "n5", pid: started.pid, startTime: started.startTime, runDir, logFile, exitFile });
  expect(words).toBe("killed by SIGKILL (status 137)");
}, 30_000);
