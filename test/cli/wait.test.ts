/** `shardctl wait`: exit 0 once the condition holds at the revision, 1 on timeout, on Stalled, on bad input. */
import { stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, expect, test } from "vitest";
import type { Daemon } from "../../src/reconciler/index.js";
import { acquireDaemonLock } from "../../src/reconciler/daemon-lock.js";
import {
  definitionText,
  revisionOf,
  runShardctl,
  startInProcessDaemon,
  startWorld,
  waitForStatus,
  writeDefinition,
  type DaemonWorld,
} from "../reconciler/daemon-fixture.js";

let world: DaemonWorld;
let daemon: Daemon;
beforeAll(async () => {
  world = await startWorld();
  daemon = await startInProcessDaemon(world);
});
afterAll(async () => {
  await daemon?.stop();
  await world?.close();
});

test("condition=Planned holds at HEAD once the daemon has planned it: exit 0 (by name and by file)", async () => {
  const file = await writeDefinition(world, "w1", definitionText(world, { nodes: ["l1", "l2"] }));
  const revision = await revisionOf(world, "w1");
  const byName = await runShardctl(world, ["wait", "w1", "--for", "condition=Planned", "--timeout", "20s"]);
  expect(byName.code).toBe(0);
  expect(byName.stdout).toContain(`w1: condition Planned holds at revision ${revision.slice(0, 12)} (Disabled)`);
  expect((await runShardctl(world, ["wait", file, "--for", "condition=Planned", "--revision", revision, "--timeout", "5s"])).code).toBe(0);
});

// Regression: each of these waited out its whole timeout (10 minutes by default) before failing.
test("Ready can never come while distributed serving is disabled: exit 1 at once, saying why", async () => {
  const started = Date.now();
  const r = await runShardctl(world, ["wait", "w1", "--for", "condition=Ready", "--timeout", "30s"]);
  expect(r.code).toBe(1);
  expect(Date.now() - started).toBeLessThan(10_000);
  expect(r.stderr).toMatch(
    /^w1: condition Ready will never hold at revision [0-9a-f]{12}: \[distributed\] enabled = false in \S*shardctl\.toml: the daemon plans clusters but stages and launches none \(set enabled = true\)\n$/,
  );
});

test('a definition that says desired = "stopped" or suspend = true: exit 1 at once for Ready, and for Planned', async () => {
  await writeDefinition(world, "w4", definitionText(world, { nodes: ["l1", "l2"], desired: "stopped" }));
  await writeDefinition(world, "w5", definitionText(world, { nodes: ["l1", "l2"], suspend: true }));
  for (const [name, why] of [
    ["w4", /\S*w4\.toml says desired = "stopped": nothing is planned or launched \(set desired = "running"\)/],
    ["w5", /\S*w5\.toml says suspend = true: the daemon takes no action on it \(set suspend = false\)/],
  ] as const) {
    for (const condition of ["Ready", "Planned"]) {
      const started = Date.now();
      const r = await runShardctl(world, ["wait", name, "--for", `condition=${condition}`, "--timeout", "30s"]);
      expect(r.code).toBe(1);
      expect(Date.now() - started).toBeLessThan(10_000);
      expect(r.stderr).toMatch(new RegExp(`^${name}: condition ${condition} will never hold at revision [0-9a-f]{12}: ${why.source}\n$`));
    }
  }
});

test("a revision the daemon has not reconciled yet is waited for, never satisfied by the older one", async () => {
  const r = await runShardctl(world, ["wait", "w1", "--for", "condition=Planned", "--revision", "f".repeat(64), "--timeout", "1s"]);
  expect(r.code).toBe(1);
  // The condition that holds is said to be the older revision's. Regression: "Planned=True (…)" read
  // as the awaited revision's.
  expect(r.stderr).toMatch(
    /^timed out after 1s waiting for condition Planned at revision f{12}: observed revision [0-9a-f]{12}, health \w+, Planned=True of revision [0-9a-f]{12}, not the one waited for \(PlanFeasible: /,
  );
});

test("Stalled at the revision → exit 1 at once with the reason", async () => {
  await writeDefinition(world, "w2", definitionText(world, { nodes: ["l1", "l2"] }).replace("context_length = 256", "context_length = 16000000"));
  await waitForStatus(world, "w2", (s) => s.health === "Stalled");
  const started = Date.now();
  const r = await runShardctl(world, ["wait", "w2", "--timeout", "30s"]);
  expect(r.code).toBe(1);
  expect(Date.now() - started).toBeLessThan(10_000);
  expect(r.stderr).toMatch(/w2 is Stalled at revision [0-9a-f]{12}: /);
});

test("bad input: an unknown condition, an unknown cluster, an invalid definition → exit 1", async () => {
  const badFor = await runShardctl(world, ["wait", "w1", "--for", "condition=Happy", "--timeout", "1s"]);
  expect(badFor.code).toBe(1);
  expect(badFor.stderr).toMatch(/expected --for condition=<Ready\|/);
  // A condition in the wrong case, and a cluster name one letter off, get a guess.
  const lower = await runShardctl(world, ["wait", "w1", "--for", "condition=ready", "--timeout", "1s"]);
  expect(lower.code).toBe(1);
  expect(lower.stderr).toMatch(/got "condition=ready" \(did you mean condition=Ready\?\)/);
  const missing = await runShardctl(world, ["wait", "nope", "--timeout", "1s"]);
  expect(missing.code).toBe(1);
  expect(missing.stderr).toMatch(/no cluster "nope": \S+ does not exist\n/);
  const typo = await runShardctl(world, ["wait", "w1x", "--timeout", "1s"]);
  expect(typo.stderr).toMatch(/no cluster "w1x": \S+ does not exist \(did you mean w1\?\)/);
  await writeFile(join(world.clustersDir, "w3.toml"), 'nodes = "l1"\n[model]\nid = "x"\n');
  const invalid = await runShardctl(world, ["wait", "w3", "--timeout", "1s"]);
  expect(invalid.code).toBe(1);
  expect(invalid.stderr).toMatch(/w3\.toml:1:9: /);
});

test("never holding is the decision table's answer: suspended and stopped says suspended, as the daemon decides", async () => {
  await writeDefinition(world, "w6", definitionText(world, { nodes: ["l1", "l2"], desired: "stopped", suspend: true }));
  await waitForStatus(world, "w6", (s) => s.health === "Suspended");
  for (const condition of ["Ready", "Planned"]) {
    const r = await runShardctl(world, ["wait", "w6", "--for", `condition=${condition}`, "--timeout", "30s"]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(new RegExp(`^w6: condition ${condition} will never hold at revision [0-9a-f]{12}: \\S*w6\\.toml says suspend = true: `));
  }
});

test("a condition in a status no daemon keeps current (the daemon crashed or was stopped) is not trusted: exit 1 at the timeout, saying so", async () => {
  await writeDefinition(world, "orphaned", definitionText(world, { nodes: ["l1", "l2"] }));
  const revision = await revisionOf(world, "orphaned");
  await waitForStatus(world, "orphaned", (s) => s.observedRevision === revision && s.conditions.some((c) => c.type === "Planned" && c.status === "True"));
  await daemon.stop();
  try {
    const waited = await runShardctl(world, ["wait", "orphaned", "--for", "condition=Planned", "--timeout", "1s"]);
    expect(waited.code).toBe(1);
    expect(waited.stdout).toBe("");
    expect(waited.stderr).toContain(
      `the status says Planned=True, but no shardctl daemon is watching ${world.clustersDir}: nothing keeps it current, and what it describes may be gone (start one: shardctl daemon)`,
    );
  } finally {
    daemon = await startInProcessDaemon(world);
  }
  // With a daemon again, the same wait holds.
  expect((await runShardctl(world, ["wait", "orphaned", "--for", "condition=Planned", "--timeout", "20s"])).code).toBe(0);
});

test("a condition a former daemon wrote counts only once the running one has looked at the cluster (its first pass dates the file, even saying the same)", async () => {
  await writeDefinition(world, "restarted", definitionText(world, { nodes: ["l1", "l2"] }));
  const revision = await revisionOf(world, "restarted");
  await waitForStatus(world, "restarted", (s) => s.observedRevision === revision && s.conditions.some((c) => c.type === "Planned" && c.status === "True"));
  await daemon.stop();
  // Past the grain a file time is allowed (a second), so the last write is surely the former daemon's.
  await new Promise((resolve) => setTimeout(resolve, 1_100));
  // A daemon that has started and not yet looked: the directory's lock taken now, no pass made.
  const starting = await acquireDaemonLock(world.clustersDir);
  try {
    const waited = await runShardctl(world, ["wait", "restarted", "--for", "condition=Planned", "--timeout", "1s"]);
    expect(waited.code).toBe(1);
    expect(waited.stderr).toContain(
      `the status was written before the running daemon (pid ${process.pid}) started, and that daemon has not looked at the cluster since: what it says (Planned=True) is a former daemon's word`,
    );
  } finally {
    await starting.release();
  }
  const file = join(world.clustersDir, "restarted.status.json");
  const before = (await stat(file)).mtimeMs;
  daemon = await startInProcessDaemon(world);
  expect((await runShardctl(world, ["wait", "restarted", "--for", "condition=Planned", "--timeout", "20s"])).code).toBe(0);
  expect((await stat(file)).mtimeMs).toBeGreaterThan(before);
});
