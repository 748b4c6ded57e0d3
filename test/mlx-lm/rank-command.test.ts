/**
 * A two-rank mlx-lm ring started exactly as launch starts it: the driver's command lines, run
 * through a real sshd node's `startDetached` (quoted for the remote shell), from a model directory
 * and a run directory whose paths hold a space, a `$` and a `'`: it serves from those paths
 * (huggingface_hub expands `$NAME` in `HF_HUB_CACHE`, which broke mlx-lm's `/v1/models`). It
 * generates no more sequences at once than the definition's `max_sequences` (what the plan sized
 * its KV caches for): mlx-lm's own default decodes up to 32 requests side by side.
 */
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createDriver, type EngineTopology, type ProcessFiles } from "../../src/engines/index.js";
import { NodePool, type DetachedProcess, type NodeAccess } from "../../src/nodes/index.js";
import { makeTestModel } from "../../src/planner/index.js";
import { freePort } from "../support/free-ports.js";
import { ensureMlxVenv } from "../support/mlx-venv.js";
import { sshNodeConfig, startSshdNodes, type SshdSet } from "../support/sshd.js";

let root: string;
let sshd: SshdSet;
let pool: NodePool;
let node: NodeAccess;
const ranks: DetachedProcess[] = [];
const logFiles: string[] = [];
let url: string;

beforeAll(async () => {
  const { python } = await ensureMlxVenv();
  root = await mkdtemp(join(tmpdir(), "shardctl-mlx-rank-"));
  // A home an operator may well have: a space, a dollar sign and a quote in the path.
  const odd = join(root, "models of $USER's");
  const modelDir = join(odd, "qwen tiny");
  const runDir = join(odd, ".shardctl", "run", "ring $(id)");
  await makeTestModel(modelDir, { family: "qwen2", layers: 2, hidden: 64, heads: 4, kvHeads: 2, seed: 3 });
  await mkdir(join(runDir, "cache"), { recursive: true });

  sshd = await startSshdNodes({ count: 1 });
  const n = sshd.nodes[0]!;
  pool = new NodePool({ knownHostsPath: sshd.knownHostsPath, sshConfigPath: join(sshd.root, "no-config") });
  node = pool.get(sshNodeConfig(sshd, 0, { modelDir: odd }));

  const port = await freePort();
  const ringPorts = [await freePort(), await freePort()];
  const topology: EngineTopology = {
    cluster: "ring",
    modelName: "qwen",
    maxSequences: 1,
    transport: "tcp",
    coordinator: { id: "coordinator", address: { host: n.host, port }, http: { host: n.host, port } },
    stages: [0, 1].map((index) => ({ index, id: `stage-${index}`, address: { host: n.host, port: ringPorts[index]! }, layers: [index, index + 1] as [number, number] })),
    explicitLayers: false,
  };
  const driver = createDriver("mlx-lm", { python, extraArgs: [] });
  const files: ProcessFiles = {
    modelDir,
    clusterConfig: join(runDir, driver.clusterConfigName),
    tokenFile: join(runDir, "transport.token"),
    cacheDir: join(runDir, "cache"),
  };
  await writeFile(files.clusterConfig, driver.renderClusterConfig(topology));
  // Launch's order: rank 0 (stage 1, the HTTP server) accepting first, then rank 1, which dials it.
  for (const index of [1, 0]) {
    const logFile = join(runDir, `stage-${index}.log`);
    logFiles.push(logFile);
    const argv = driver.stageArgv(topology, topology.stages[index]!, files);
    ranks.push(await node.startDetached(argv, { logFile, cwd: runDir, exitStatusFile: join(runDir, `stage-${index}.exit`) }));
    if (index === 1) await waitLine(logFile, /\[ring\] Rank 0 accepting/);
  }
  url = `http://${n.host}:${port}`;
  await waitServing();
}, 600_000);

afterAll(async () => {
  for (const rank of ranks) await node.signal(rank.pid, "SIGKILL", rank.startTime).catch(() => undefined);
  await pool?.close();
  await sshd?.close();
  if (root !== undefined) await rm(root, { recursive: true, force: true });
});

/** Until `line` is in the log (60 s at most). */
async function waitLine(logFile: string, line: RegExp): Promise<void> {
  const deadline = Date.now() + 60_000;
  while (!line.test(await readFile(logFile, "utf8").catch(() => ""))) {
    if (Date.now() > deadline) throw new Error(`${logFile} never printed ${line.source}:\n${await readFile(logFile, "utf8").catch(() => "(none)")}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

/** Until a one-token completion answers (its /health says 200 before the model is loaded). */
async function waitServing(): Promise<void> {
  const deadline = Date.now() + 120_000;
  while (Date.now() < deadline) {
    const answer = await complete(1).catch(() => undefined);
    if (answer !== undefined) return;
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
  const logs = await Promise.all(logFiles.map((file) => readFile(file, "utf8").catch(() => "(none)")));
  throw new Error(`the ring never served a completion; its logs:\n${logs.join("\n----\n")}`);
}

/** A greedy completion of exactly `tokens` tokens (one token forced, so no end-of-text cuts it short). */
function requestCompletion(tokens: number, stream: boolean): Promise<Response> {
  return fetch(`${url}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: "default_model", prompt: "hello", max_tokens: tokens, temperature: 0, logit_bias: { "7": 100 }, stream }),
  });
}

async function complete(tokens: number): Promise<{ tokens: number }> {
  const response = await requestCompletion(tokens, false);
  if (response.status !== 200) throw new Error(`completion answered ${response.status}: ${await response.text()}`);
  const body = (await response.json()) as { usage: { completion_tokens: number } };
  return { tokens: body.usage.completion_tokens };
}

/** A streamed completion: `started` resolves at its first token, `received()` counts the tokens so far. */
function streamCompletion(tokens: number): { started: Promise<void>; received: () => number; done: Promise<number> } {
  let start!: () => void;
  const started = new Promise<void>((resolve) => (start = resolve));
  let text = "";
  const received = (): number => text.split("\n").filter((line) => line.startsWith("data: {")).length;
  const done = (async () => {
    const response = await requestCompletion(tokens, true);
    if (response.status !== 200 || response.body === null) throw new Error(`streamed completion answered ${response.status}`);
    for await (const chunk of response.body) {
      text += Buffer.from(chunk).toString("utf8");
      if (received() > 0) start();
    }
    return received();
  })();
  return { started, received, done };
}

describe("an mlx-lm ring started by the driver's command lines over ssh", () => {
  it("serves from a model path and a run directory holding a space, a $ and a quote", async () => {
    expect((await complete(3)).tokens).toBe(3);
    const models = (await (await fetch(`${url}/v1/models`)).json()) as { data: Array<{ id: string }> };
    expect(models.data.map((m) => m.id)).toContain(join(root, "models of $USER's", "qwen tiny"));
  });

  it("with max_sequences = 1, a second request waits until the first has finished", async () => {
    const long = streamCompletion(1000);
    // The short one is sent once the long one is generating: mlx-lm would add it to the batch.
    await long.started;
    await complete(1);
    // Answered when the long one had all (or, the last few still in flight, nearly all) of its tokens.
    const receivedByThen = long.received();
    expect(await long.done).toBeGreaterThanOrEqual(1000);
    expect(receivedByThen).toBeGreaterThan(900);
  }, 120_000);
});
