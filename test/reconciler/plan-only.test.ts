/**
 * `[distributed] enabled = false` (the default): the daemon plans and writes status, but stages and
 * launches nothing, and says why; `*.status.json` never triggers a pass; the committed status schema
 * is the one generated from the zod schema.
 */
import { watch } from "node:fs";
import { mkdir, readFile, rename, rm, rmdir, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { expect, test } from "vitest";
import { Ledger } from "../../src/launch/index.js";
import { renderStatusSchema } from "../../src/reconciler/index.js";
import { conditionOf, definitionText, enginesOf, readStatusFile, repoRoot, revisionOf, sleep, waitForStatus, writeDefinition } from "./daemon-fixture.js";
import { useDaemonWorld } from "./use-daemon-world.js";

const dw = useDaemonWorld();

test("schemas/status.schema.json is not stale: it is what renderStatusSchema() generates (npm run schemas)", async () => {
  expect(await readFile(join(repoRoot, "schemas/status.schema.json"), "utf8")).toBe(renderStatusSchema());
});

test("distributed disabled → planned, nothing launched, health Disabled, status says why", async () => {
  const { world } = dw;
  await writeDefinition(world, "plain", definitionText(world, { nodes: ["l1", "l2"] }));
  const revision = await revisionOf(world, "plain");
  const status = await waitForStatus(world, "plain", (s) => s.observedRevision === revision && s.health === "Disabled");
  expect(conditionOf(status, "Planned")).toMatchObject({ status: "True", reason: "PlanFeasible", observedRevision: revision });
  expect(conditionOf(status, "Ready")).toMatchObject({ status: "False", reason: "DistributedDisabled" });
  expect(conditionOf(status, "Ready")?.message).toContain("enabled = false");
  expect(status.plan?.stages.map((s) => [s.node, s.layers])).toEqual([
    ["l1", [0, 2]],
    ["l2", [2, 4]],
  ]);
  expect(status.stages).toEqual([]);
  expect(status.history.at(-1)).toMatchObject({ action: "plan", result: "success" });
  await sleep(300);
  expect(await new Ledger(world.stateDir).list()).toEqual([]);
  expect(await enginesOf(world)).toEqual([]);
});

test("the status file is written only when its content changes, and writing it triggers nothing", async () => {
  const { world, daemon } = dw;
  const file = join(world.clustersDir, "plain.status.json");
  const before = await readFile(file, "utf8");
  const log = join(world.root, "daemon.log");
  const passes = async () => (await readFile(log, "utf8")).split("\n").filter((l) => l.includes('"cluster":"plain"') && l.includes('"steps":')).length;
  const n = await passes();
  // A foreign write to the status file is not an event. (Written by rename, as the daemon does, so
  // the status audit never reads it half-written.)
  await writeFile(`${file}.foreign`, before);
  await rename(`${file}.foreign`, file);
  await sleep(400);
  expect(await passes()).toBe(n);
  // A comment-only edit of the definition is a pass, but the same revision: the file is untouched.
  // Same text is not enough (a rewrite of the same text keeps it): the daemon writes by temp file and
  // rename, so any write gives the file a new inode and new times, and the directory watch sees it.
  const untouched = await stat(file);
  const events: string[] = [];
  const watcher = watch(world.clustersDir, (event, name) => {
    if (name === "plain.status.json") events.push(event);
  });
  try {
    const definition = join(world.clustersDir, "plain.toml");
    await writeFile(definition, `# a comment\n${await readFile(definition, "utf8")}`);
    const deadline = Date.now() + 5_000;
    while ((await passes()) === n && Date.now() < deadline) await sleep(50);
    expect(await passes()).toBe(n + 1);
    await daemon.whenIdle();
    expect(await readFile(file, "utf8")).toBe(before);
    const after = await stat(file);
    expect({ ino: after.ino, mtimeMs: after.mtimeMs, ctimeMs: after.ctimeMs }).toEqual({ ino: untouched.ino, mtimeMs: untouched.mtimeMs, ctimeMs: untouched.ctimeMs });
    // Let the watch deliver anything pending before judging it.
    await sleep(200);
    expect(events).toEqual([]);
  } finally {
    watcher.close();
  }
});

test("a status file removed or overwritten behind the daemon's back is put back as the daemon last wrote it, at once and without a pass", async () => {
  const { world } = dw;
  const file = join(world.clustersDir, "plain.status.json");
  const written = await readFile(file, "utf8");
  const log = join(world.root, "daemon.log");
  const passes = async () => (await readFile(log, "utf8")).split("\n").filter((l) => l.includes('"cluster":"plain"') && l.includes('"steps":')).length;
  const n = await passes();
  const putBack = async (): Promise<void> => {
    const deadline = Date.now() + 5_000;
    while ((await readFile(file, "utf8").catch(() => "")) !== written && Date.now() < deadline) await sleep(50);
    expect(await readFile(file, "utf8")).toBe(written);
  };
  // A `git clean` of an untracked status file.
  await rm(file);
  await putBack();
  // A checkout of an old status file, or a hand edit, that says something the daemon did not.
  await writeFile(`${file}.foreign`, written.replace('"health": "Disabled"', '"health": "Healthy"'));
  await rename(`${file}.foreign`, file);
  await putBack();
  // A directory in its place for a while (the daemon cannot write then), removed: put back too.
  await rm(file);
  await mkdir(file);
  await sleep(1_500);
  await rmdir(file);
  await putBack();
  expect(await passes()).toBe(n);
});

test("an infeasible plan stalls with the planner's reason", async () => {
  const { world } = dw;
  const text = definitionText(world, { nodes: ["l1", "l2"] }).replace("context_length = 256", "context_length = 16000000");
  await writeDefinition(world, "huge", text);
  const status = await waitForStatus(world, "huge", (s) => s.health === "Stalled");
  expect(conditionOf(status, "Stalled")?.status).toBe("True");
  expect(conditionOf(status, "Planned")?.status).toBe("False");
  expect(status.lastError?.message).toMatch(/infeasible/);
  expect(status.plan?.feasible).toBe(false);
  expect(await readStatusFile(world, "huge")).toBeDefined();
});

test("two different invalid edits in a row are each logged as a warning with its own error; the same one again is folded to debug", async () => {
  const { world, daemon } = dw;
  const valid = definitionText(world, { nodes: ["l1", "l2"] });
  const withKey = (line: string): string => valid.replace("[model]\n", `[model]\n${line}\n`);
  const log = join(world.root, "daemon.log");
  const lines = async (): Promise<Array<{ level: number; error?: string }>> =>
    (await readFile(log, "utf8"))
      .split("\n")
      .filter((l) => l.includes('"cluster":"typos"') && l.includes('"steps":'))
      .map((l) => JSON.parse(l) as { level: number; error?: string });
  const warned = async (key: string): Promise<number> => (await lines()).filter((l) => l.level === 40 && l.error?.includes(key) === true).length;
  const until = async (check: () => Promise<boolean>): Promise<void> => {
    const deadline = Date.now() + 10_000;
    while (!(await check()) && Date.now() < deadline) await sleep(50);
    expect(await check()).toBe(true);
  };
  await writeDefinition(world, "typos", withKey("contxt_length = 64"));
  await until(async () => (await warned("model.contxt_length:")) === 1);
  await writeDefinition(world, "typos", withKey("max_sequence = 2"));
  await until(async () => (await warned("model.max_sequence:")) === 1);
  // The same invalid text written again (a pass, as any write is): a repeat, at debug level.
  const before = (await lines()).length;
  await writeDefinition(world, "typos", withKey("max_sequence = 2"));
  await until(async () => (await lines()).length > before);
  await daemon.whenIdle();
  expect((await lines()).slice(before).map((l) => l.level)).toEqual([20]);
  expect(await warned("model.max_sequence:")).toBe(1);
});
