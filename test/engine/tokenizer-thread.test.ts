/**
 * The coordinator's tokenizer thread (long prompts are tokenized there) stopped for good, as a
 * tokenizer that never returns leaves it: each of its threads frozen with ptrace
 * (test/support/freeze-thread.py) while the rest of the process runs on. A long prompt is then
 * answered 500 `tokenizer_failed` once the thread is overdue, not held for ever while /health says
 * 200, and the next long prompt starts another thread and is served.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { readdirSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { makeTestModel } from "../../src/planner/test-model/index.js";
import { killAll, postJson, requireBuild, startSingle } from "./support.js";

const freezeThread = join(import.meta.dirname, "../support/freeze-thread.py");
let dir: string;
let single: Awaited<ReturnType<typeof startSingle>>;
const tracers: ChildProcess[] = [];

beforeAll(async () => {
  requireBuild();
  dir = await mkdtemp(join(tmpdir(), "engine-tokenizer-thread-"));
  const modelDir = join(dir, "tiny-llama");
  await makeTestModel(modelDir, { layers: 2, hidden: 64, vocab: 320, seed: 5 });
  single = await startSingle(modelDir, ["--no-warmup", "--model-name", "tiny-llama", "--context-length", "32768"]);
}, 60_000);
afterAll(async () => {
  for (const tracer of tracers) tracer.kill("SIGTERM");
  await single?.stop();
  await killAll();
  await rm(dir, { recursive: true, force: true });
});

const threads = (pid: number): string[] => readdirSync(`/proc/${pid}/task`);
/** A prompt long enough for the thread (20 000 characters and more), of some 6 000 tokens. */
const longPrompt = (word: string): string => `${word} ${"the ".repeat(6_000)}`;
const complete = (prompt: string): Promise<{ status: number; json: Record<string, unknown> }> =>
  postJson(`${single.baseUrl}/v1/completions`, { model: "tiny-llama", prompt, max_tokens: 1, temperature: 0 });

it("a stuck tokenizer thread fails the long prompts it holds within its deadline, and the next one gets a new thread", async () => {
  const pid = single.proc.child.pid!;
  const before = new Set(threads(pid));
  const first = await complete(longPrompt("one"));
  expect(first.status, JSON.stringify(first.json)).toBe(200);
  // The threads the first long prompt started: the tokenizer's worker and its own helpers.
  const started = threads(pid).filter((tid) => !before.has(tid));
  expect(started.length).toBeGreaterThan(0);
  for (const tid of started) {
    const tracer = spawn("python3", [freezeThread, tid], { stdio: ["ignore", "pipe", "inherit"] });
    tracers.push(tracer);
    await new Promise<void>((resolve, reject) => {
      tracer.stdout!.on("data", (d: Buffer) => d.toString().includes("frozen") && resolve());
      tracer.once("exit", (code) => reject(new Error(`freeze-thread.py exited ${code}`)));
    });
  }
  const asked = performance.now();
  const stuck = await complete(longPrompt("two"));
  expect(stuck.status).toBe(500);
  expect(JSON.stringify(stuck.json)).toMatch(/tokenizer_failed.*did not answer within \d+ ms|did not answer within \d+ ms.*tokenizer_failed/);
  expect(performance.now() - asked).toBeLessThan(20_000);
  // Short prompts are tokenized in place all along.
  expect((await complete("three")).status).toBe(200);
  expect((await complete(longPrompt("four"))).status).toBe(200);
}, 90_000);
