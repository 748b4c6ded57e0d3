/**
 * A long prompt holds a request that waits for the only slot (`--max-sequences 1`) back while a real
 * 2-stage shard-engine processes it, and nothing is sampled meanwhile: a generation watchdog whose
 * deadline is shorter than that prompt must take it for busy, not for a hung pipeline (a client
 * could otherwise tear any cluster down with one request). shard-engine's /health counts the
 * prompt tokens it has processed (`promptTokens`), chunk by chunk, which the watchdog reads as work.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { monitorCluster, type DeathEvent, type WatchedCluster, type WatchedProcess } from "../../src/health/index.js";
import { LocalNode } from "../../src/nodes/index.js";
import { type Cluster, killAll, requireBuild, startLongPromptCluster } from "../engine/support.js";

let dir: string;
let cluster: Cluster;
let node: LocalNode;
const model = "tiny-llama";

beforeAll(async () => {
  requireBuild();
  dir = await mkdtemp(join(tmpdir(), "long-prompt-watchdog-"));
  node = new LocalNode({ name: "local", host: "local", modelDir: dir });
  // The prompt below takes many chunks, far past the watchdog's deadline; a probe waits for the only slot.
  ({ cluster } = await startLongPromptCluster(dir, ["--max-sequences", "1"]));
}, 60_000);
afterAll(async () => {
  await cluster?.stop();
  await killAll();
  await rm(dir, { recursive: true, force: true });
});

const health = async (): Promise<{ generatedTokens: number; promptTokens: number }> =>
  (await (await fetch(`${cluster.baseUrl}/health`)).json()) as { generatedTokens: number; promptTokens: number };

async function watched(role: "stage" | "coordinator", pid: number, index?: number): Promise<WatchedProcess> {
  return { role, ...(index === undefined ? {} : { index }), node: "local", pid, startTime: (await node.processStartTime(pid))! };
}

const longPrompt = Array.from({ length: 8000 }, (_, i) => i % 300);
const complete = (prompt: number[]): Promise<Response> =>
  fetch(`${cluster.baseUrl}/v1/completions`, { method: "POST", body: JSON.stringify({ model, prompt, max_tokens: 1 }) });

it("a prompt that takes longer than the watchdog's deadline is busy, not a hang; /health counts its tokens chunk by chunk", async () => {
  // The deadline must outlast the slowest chunk (the watchdog sees work only between chunks; each
  // chunk attends to all before it, so the last of 16 takes about twice the mean) and be far shorter
  // than the whole prompt. It is measured now, as a quarter of the prompt's time (at least 2 s): a
  // fixed 2 s was outlived by the last chunk alone when other tests loaded the machine.
  const measuring = performance.now();
  expect((await complete(longPrompt)).status).toBe(200);
  const deadlineMs = Math.max(2_000, Math.ceil((performance.now() - measuring) / 4));
  const entry: WatchedCluster = {
    cluster: "long",
    engine: "reference",
    processes: [
      await watched("stage", cluster.stages[0]!.child.pid!, 0),
      await watched("stage", cluster.stages[1]!.child.pid!, 1),
      await watched("coordinator", cluster.coordinator.child.pid!),
    ],
    ports: [],
    coordinatorUrl: cluster.baseUrl,
  };
  const deaths: DeathEvent[] = [];
  const monitor = monitorCluster(entry, {
    nodeFor: () => node,
    pollIntervalMs: 200,
    exitWatch: false,
    generationWatchdog: { intervalMs: 200, timeoutMs: deadlineMs },
    onDeath: (e) => deaths.push(e),
  });
  try {
    const before = await health();
    const started = performance.now();
    const long = complete(longPrompt);
    // Its count moves while it is processed, a chunk at a time, and nothing is sampled meanwhile.
    const seen = new Set<number>();
    for (let i = 0; i < 50 && seen.size < 3; i++) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      const now = await health();
      if (now.generatedTokens === before.generatedTokens) seen.add(now.promptTokens);
    }
    expect(seen.size).toBeGreaterThanOrEqual(2);
    expect((await long).status).toBe(200);
    // Long enough for the watchdog's probe, waiting for the only slot, to outlive its deadline.
    expect(performance.now() - started).toBeGreaterThan(deadlineMs + 1_000);
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    expect(deaths).toEqual([]);
    expect((await health()).promptTokens - before.promptTokens).toBeGreaterThanOrEqual(8000);
  } finally {
    await monitor.stop();
  }
}, 120_000);
