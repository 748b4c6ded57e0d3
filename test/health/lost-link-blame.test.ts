/**
 * A member that exits because its link to a peer broke, when that peer cannot be seen gone: the
 * blame stays on the member seen exiting, and the death says what it said and what was seen of the
 * peer. Real shard-engine processes (two stages and a coordinator, started as a local node starts
 * them, each logging to its file); stage-1 is watched through a node whose SSH port refuses (its
 * control channel lost), then SIGKILLed. Its neighbours exit saying they lost their link to it,
 * and the monitor, unable to ask about stage-1, names the neighbour it saw exit with those words —
 * before, it said only that the neighbour's pid exited, as if it had died by itself.
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { bundledShardEngineCommand } from "../../src/engines/index.js";
import { monitorCluster, type DeathEvent, type WatchedCluster, type WatchedProcess } from "../../src/health/index.js";
import { LocalNode, NodePool, type NodeAccess } from "../../src/nodes/index.js";
import { makeTestModel } from "../../src/planner/test-model/index.js";
import { freePort, requireBuild, writeClusterToml } from "../engine/support.js";
import { generatePrivateKey } from "../support/ssh-key.js";
import { allocateHost } from "../support/test-world.js";

let dir: string;
let local: NodeAccess;
let pool: NodePool;
const started: WatchedProcess[] = [];

beforeAll(async () => {
  requireBuild();
  dir = await mkdtemp(join(tmpdir(), "shardctl-lost-link-"));
  local = new LocalNode({ name: "local", host: "local", modelDir: dir });
  await writeFile(join(dir, "id_ed25519"), generatePrivateKey(), { mode: 0o600 });
  pool = new NodePool({ knownHostsPath: join(dir, "known_hosts"), sshConfigPath: join(dir, "none"), connectDeadlineMs: 500 });
});
afterAll(async () => {
  for (const p of started) await local.signal(p.pid, "SIGKILL", p.startTime).catch(() => undefined);
  await pool?.close();
  await rm(dir, { recursive: true, force: true });
});

/** Start shard-engine with `args` as a local node starts an engine: detached, logging to `name`.log. */
async function startEngine(name: string, role: "stage" | "coordinator", index: number | undefined, args: string[]): Promise<WatchedProcess> {
  const logFile = join(dir, `${name}.log`);
  const { pid, startTime } = await local.startDetached([...bundledShardEngineCommand, ...args], { logFile, cwd: dir });
  const process: WatchedProcess = { role, ...(index === undefined ? {} : { index }), node: "local", pid, startTime, logFile };
  started.push(process);
  return process;
}

it("a neighbour that exited because its link to an unobservable peer broke is named with those words", async () => {
  const modelDir = join(dir, "model");
  await makeTestModel(modelDir, { layers: 4, hidden: 64, seed: 3 });
  const layout = await writeClusterToml({ stages: 2, dir });
  const stages: WatchedProcess[] = [];
  for (let i = 0; i < 2; i++) {
    const args = ["-m", modelDir, "--distributed-config", layout.file, "--node-id", `stage-${i}`, "--host", "127.0.0.1", "--port", "1", "--no-warmup"];
    stages.push(await startEngine(`stage-${i}`, "stage", i, args));
    const { host, port } = layout.stages[i]!;
    await until(() => accepts(host, port), 20_000);
  }
  const httpHost = await allocateHost();
  const httpPort = await freePort(httpHost);
  const coordinator = await startEngine("coordinator", "coordinator", undefined, [
    "-m",
    modelDir,
    "--distributed-config",
    layout.file,
    "--node-id",
    "coordinator",
    "--host",
    httpHost,
    "--port",
    String(httpPort),
  ]);
  const url = `http://${httpHost}:${httpPort}`;
  await until(async () => (await fetch(`${url}/health`).catch(() => undefined))?.status === 200, 30_000);

  // stage-1 runs here, but the monitor asks about it through "n2", whose SSH port refuses.
  const n2 = pool.get({
    name: "n2",
    host: await allocateHost(),
    port: 1,
    user: "nobody",
    identityFile: join(dir, "id_ed25519"),
    hostKeyPolicy: "accept-new",
    modelDir: dir,
  });
  const cut = { ...stages[1]!, node: "n2" };
  const cluster: WatchedCluster = { cluster: "c", engine: "reference", processes: [stages[0]!, cut, coordinator], ports: [] };
  let died: (death: DeathEvent) => void = () => undefined;
  const death = new Promise<DeathEvent>((resolve) => (died = resolve));
  const monitor = monitorCluster(cluster, { onDeath: (d) => died(d), nodeFor: (name) => (name === "n2" ? n2 : local), pollIntervalMs: 300 });
  try {
    process.kill(stages[1]!.pid, "SIGKILL");
    const seen = await death;
    expect(["stage-0", "coordinator"]).toContain(seen.label);
    expect(seen.detail).toMatch(
      /^pid \d+ (exited|is no longer running) because its link to stage-1 broke \(.+\), and stage-1 did not answer when asked whether it runs$/,
    );
  } finally {
    await monitor.stop();
  }
}, 90_000);

async function until(check: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`not true within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** Whether `host:port` accepts a TCP connection (a stage's readiness). */
function accepts(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, host);
    socket.once("connect", () => {
      socket.destroy();
      resolve(true);
    });
    socket.once("error", () => resolve(false));
  });
}
