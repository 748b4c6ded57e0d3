/**
 * A stage killed behind the daemon's back (`kill -9`): the cluster is torn down and relaunched
 * within the restart budget of its revision, then Stalled once the budget is spent, keeping the
 * evidence (exit status, last log lines) in its status; `shardctl reconcile` asks again. A node that
 * refuses the launch files is its own fault, not the cluster's: tried again, never counted. A model
 * file damaged on a node is fetched again at the next launch, and said; so is a pushed folder
 * changed under a running revision.
 */
import { cp, mkdir, readdir, readFile, rm, stat, truncate, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { expect, test } from "vitest";
import { Ledger } from "../../src/launch/index.js";
import { conditionOf, enginesOf, isReadyAt, killStage, readStatusFile, runShardctl, sleep, waitForStatus } from "./daemon-fixture.js";
import { isServingAt, useDaemonWorld } from "./use-daemon-world.js";

const dw = useDaemonWorld({ sshNodes: 2, settings: { restartBudget: 2 }, resyncMs: 2_000 });

test("kill -9 of a stage → torn down and relaunched within the budget, then Stalled with evidence; reconcile asks again", async () => {
  const { world } = dw;
  const revision = await dw.define("crashy", { nodes: ["n1", "n2"] });
  const first = await dw.waitServing("crashy", revision);
  expect(first.restarts).toMatchObject({ revision, count: 1, budget: 2, evidence: [] });
  const firstPids = first.stages.map((s) => s.pid);

  // Launch 2 of 2: the daemon notices the death, tears down and relaunches.
  const killed = await killStage(first, 1);
  const second = await waitForStatus(world, "crashy", (s) => s.restarts?.count === 2 && isServingAt(s, revision));
  expect(second.stages.map((s) => s.pid)).not.toEqual(firstPids);
  expect(second.restarts!.evidence).toHaveLength(1);
  const evidence = second.restarts!.evidence[0]!;
  // The killed stage is named first; a peer that exited because its link to it broke, when its
  // exit was seen first, follows as a consequence ("; stage-0 on n1: pid … exited because …").
  expect(evidence.message).toMatch(/^stage-1 on n2: /);
  // How it ended, from its wrapper: an exit status or a signal; for a member judged while it still
  // ran (an unhealthy coordinator, a closed port), the way the teardown ended it, said as such.
  expect(evidence.message.split("; ")[0]).toMatch(/\((at the teardown: )?((exited )?with status \d+|killed by SIG[A-Z]+ \(status \d+\))\)$/);
  expect(evidence.reason).toMatch(/^[A-Z][A-Za-z]+$/);
  expect(evidence.logTail.length).toBeGreaterThan(0);
  // Nothing of the first launch is left.
  const engines = await enginesOf(world);
  expect(engines.some((l) => l.startsWith(`${killed} `))).toBe(false);
  for (const pid of firstPids) expect(engines.some((l) => l.startsWith(`${pid} `))).toBe(false);

  // The budget is spent: the next death stalls the cluster, torn down, evidence kept.
  await killStage(second, 0);
  const stalled = await waitForStatus(world, "crashy", (s) => s.health === "Stalled");
  expect(conditionOf(stalled, "Stalled")).toMatchObject({ status: "True", reason: "RestartBudgetExhausted", observedRevision: revision });
  expect(conditionOf(stalled, "Ready")?.status).toBe("False");
  expect(stalled.lastError?.reason).toBe("RestartBudgetExhausted");
  // The stall says why the last launch died, not only that the budget is spent.
  expect(conditionOf(stalled, "Stalled")?.message).toMatch(/the last failure: [A-Z][A-Za-z]+: (stage-[01]|coordinator) on /);
  expect(stalled.restarts!.count).toBe(2);
  expect(stalled.restarts!.evidence).toHaveLength(2);
  expect(stalled.restarts!.evidence[1]!.message).toMatch(/(stage-[01]|coordinator) on (n1|n2|local): /);
  // `shardctl status <name>` prints the last lost launch with its process's last log lines.
  const withTail = await waitForStatus(world, "crashy", (s) => (s.restarts?.evidence[1]?.logTail.length ?? 0) > 0);
  // The death's first status: the survivors are being stopped (they may run out a grace period), not
  // "no stage runs"; once torn down, nothing runs.
  const atDeath = world.audit.statusesOf("crashy").find((s) => s.restarts?.count === 2 && s.restarts.evidence.length === 2);
  expect(conditionOf(atDeath!, "StagesListening")).toMatchObject({ status: "False", reason: "TearingDown" });
  expect(conditionOf(atDeath!, "StagesListening")?.message).toMatch(
    /^tearing down revision [0-9a-f]{12} \([A-Za-z]+: (stage-\d|coordinator)\): (the stages are being stopped|(stage-\d, )*stage-\d (is|are) gone, any other stage is being stopped)$/,
  );
  // The coordinator exits by itself once its link to the killed stage breaks: seen gone already, or being stopped.
  expect(conditionOf(atDeath!, "CoordinatorHealthy")?.message).toMatch(/: the coordinator (is being stopped|is gone)$/);
  const tornDown = await waitForStatus(world, "crashy", (s) => s.health === "Stalled" && conditionOf(s, "StagesListening")?.reason !== "TearingDown");
  expect(conditionOf(tornDown, "StagesListening")).toMatchObject({ status: "False", reason: "NotRunning", message: "no stage runs" });
  expect(conditionOf(tornDown, "CoordinatorHealthy")).toMatchObject({ status: "False", reason: "NotRunning" });
  const shown = await runShardctl(world, ["status", "crashy"]);
  const last = withTail.restarts!.evidence[1]!;
  expect(shown.stdout).toContain(`last lost launch, ${last.reason} at ${last.at}: ${last.message}`);
  expect(shown.stdout).toMatch(/\nits last (log line|\d+ log lines):\n {2}/);
  expect(shown.stdout).toContain(`\n  ${last.logTail.at(-1)!}`);
  await sleep(1_000);
  expect(await enginesOf(world)).toEqual([]);
  expect(await new Ledger(world.stateDir).read("crashy")).toBeUndefined();
  // Still Stalled after resyncs: no further launch.
  await sleep(2_500);
  expect((await readStatusFile(world, "crashy"))!.restarts!.count).toBe(2);
  expect(await enginesOf(world)).toEqual([]);

  // CI's wait fails at once on a Stalled cluster, printing why.
  const waited = await runShardctl(world, ["wait", "crashy", "--timeout", "30s"]);
  expect(waited.code).toBe(1);
  expect(waited.stderr).toMatch(/Stalled at revision .*RestartBudgetExhausted/);

  // `shardctl reconcile` gives a fresh budget; `wait` right after it (what CI runs) sees Ready, not
  // the Stalled the request lifted.
  const asked = await runShardctl(world, ["reconcile", "crashy"]);
  expect(asked.code).toBe(0);
  expect(asked.stdout).toContain("the daemon took the request");
  // The file read at once no longer says Stalled: it holds the request's own words, or, if the pass
  // the request asked for has already begun, that pass's.
  const afterAsk = (await readStatusFile(world, "crashy"))!;
  expect(afterAsk.health).not.toBe("Stalled");
  expect(conditionOf(afterAsk, "Stalled")?.status).toBe("False");
  const waitedAgain = await runShardctl(world, ["wait", "crashy", "--timeout", "60s"]);
  expect(waitedAgain.stderr).toBe("");
  expect(waitedAgain.code).toBe(0);
  const again = await waitForStatus(world, "crashy", (s) => isReadyAt(s, revision) && s.health === "Healthy");
  expect(again.restarts!.count).toBe(1);
  expect(conditionOf(again, "Stalled")?.status).toBe("False");
});

test("a node that refuses the launch files (its run folder blocked): tried again without spending the budget, never Stalled; launched once the node takes them", async () => {
  const { world } = dw;
  // A file where the cluster's run folder goes on n2: root writes through permissions, not through this.
  const blocked = join(world.sshd!.nodes[1]!.modelDir, ".shardctl", "run", "blocked");
  await mkdir(dirname(blocked), { recursive: true });
  await writeFile(blocked, "not a folder\n");
  const revision = await dw.define("blocked", { nodes: ["n1", "n2"] });
  // Three failed launches with a budget of 2: none counted, the cluster not stalled. Read between
  // launches: one under way counts itself until it fails and is given back (a launch counted would
  // leave the count at 1 or more for good, and stall the cluster at 2).
  const refused = await waitForStatus(
    world,
    "blocked",
    (s) =>
      (s.restarts?.evidence.filter((e) => e.reason === "LaunchFilesFailed").length ?? 0) >= 3 &&
      conditionOf(s, "Ready")?.reason !== "Launching" &&
      (s.restarts?.count ?? 0) === 0,
    60_000,
  );
  expect(refused.restarts?.count ?? 0).toBe(0);
  expect(refused.health).not.toBe("Stalled");
  expect(refused.lastError?.message).toContain(`could not write the launch files in ${blocked} on n2: `);
  expect(refused.lastError?.message).toContain(
    "that folder must be writable by the node's user (the launch is tried again meanwhile, not counted against the restart budget)",
  );
  await rm(blocked);
  const ready = await dw.waitServing("blocked", revision);
  expect(ready.restarts?.count).toBe(1);
}, 120_000);

test("a model file damaged on a node is fetched again at the next launch, and the status and the log say so", async () => {
  const { world } = dw;
  const revision = await dw.define("damaged", { nodes: ["n1", "n2"], modelSource: "push" });
  const serving = await dw.waitServing("damaged", revision);
  // n2's copy of the weights (the largest file it holds), cut short behind the daemon's back.
  const files = (await readdirDeep(world.sshd!.nodes[1]!.modelDir)).filter((f) => !f.includes(`${join(".shardctl", "run")}`));
  const sizes = await Promise.all(files.map(async (f) => ({ f, size: (await stat(f)).size })));
  const weights = sizes.sort((a, b) => b.size - a.size)[0];
  if (weights === undefined) throw new Error(`no model file was pushed under ${world.sshd!.nodes[1]!.modelDir}`);
  await truncate(weights.f, Math.floor(weights.size / 2));
  await killStage(serving, 1);
  const again = await waitForStatus(world, "damaged", (s) => (s.restarts?.count ?? 0) >= 2 && isServingAt(s, revision), 90_000);
  expect(conditionOf(again, "Staged")?.message).toMatch(/; repaired on n2, which held model files that did not match their size or checksum$/);
  expect((await stat(weights.f)).size).toBe(weights.size);
}, 120_000);

// Regression: a pushed folder changed in place was staged again at the next launch and said as files
// the node "lost since they were staged".
test("a pushed model folder changed under a running revision: the next launch stages and serves the new files, and the status says the folder changed", async () => {
  const { world } = dw;
  const folder = join(world.root, "models", "changing");
  await cp(world.modelDir, folder, { recursive: true });
  const revision = await dw.define("changing", { nodes: ["n1", "n2"], modelSource: "push", modelId: folder });
  const serving = await dw.waitServing("changing", revision);
  // A file of the folder edited in place (the definition unchanged).
  const config = join(folder, "tokenizer_config.json");
  await writeFile(config, JSON.stringify({ ...(JSON.parse(await readFile(config, "utf8")) as object), model_max_length: 4096 }));
  await killStage(serving, 1);
  const again = await waitForStatus(world, "changing", (s) => (s.restarts?.count ?? 0) >= 2 && isServingAt(s, revision), 90_000);
  expect(conditionOf(again, "Staged")?.message).toMatch(
    /; the model at \S+changing changed since this revision was staged \(its files now hash to [0-9a-f]{12}, were [0-9a-f]{12}\): the new files were staged$/,
  );
  expect(conditionOf(again, "Staged")?.message).not.toContain("repaired");
}, 120_000);

async function readdirDeep(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true, recursive: true });
  return entries.filter((e) => e.isFile()).map((e) => join(e.parentPath, e.name));
}
