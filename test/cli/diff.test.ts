/** `shardctl diff`: desired (definitions) vs observed (the ledger): exit 0 none, 2 changes, 1 error. */
import { mkdir, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, expect, test } from "vitest";
import { Ledger } from "../../src/launch/index.js";
import {
  conditionOf,
  definitionText,
  freePort,
  freePortRange,
  isReadyAt,
  removeDefinition,
  revisionOf,
  runShardctl,
  startInProcessDaemon,
  startWorld,
  waitForStatus,
  writeDefinition,
  writeSettings,
  type DaemonWorld,
} from "../reconciler/daemon-fixture.js";

let world: DaemonWorld;
beforeAll(async () => {
  world = await startWorld();
  await writeDefinition(world, "d1", definitionText(world, { nodes: ["l1", "l2"] }));
});
afterAll(async () => {
  await world?.close();
});

const entry = (cluster: string, revision: string) => ({
  cluster,
  revision,
  phase: "running" as const,
  startedAt: new Date().toISOString(),
  processes: [],
  ports: [],
});

test("exit 0 when nothing differs (distributed disabled, nothing runs)", async () => {
  const r = await runShardctl(world, ["diff"]);
  expect(r.code).toBe(0);
  expect(r.stdout).toContain("no differences");
});

test("exit 2 with what would change: launch, replace, stop, prune", async () => {
  await writeSettings(world, { enabled: true });
  const launch = await runShardctl(world, ["diff"]);
  expect(launch.code).toBe(2);
  expect(launch.stdout).toMatch(/^\+ d1: launch revision [0-9a-f]{12}$/m);

  const ledger = new Ledger(world.stateDir);
  await ledger.write(entry("d1", "0".repeat(64)));
  const replace = await runShardctl(world, ["diff", "d1"]);
  expect(replace.code).toBe(2);
  expect(replace.stdout).toMatch(/^~ d1: replace revision 000000000000 with [0-9a-f]{12}$/m);

  await ledger.write(entry("d1", await revisionOf(world, "d1")));
  await ledger.write(entry("orphan", "1".repeat(64)));
  const prune = await runShardctl(world, ["diff"]);
  expect(prune.code).toBe(2);
  expect(prune.stdout).toMatch(/^- orphan: prune/m);
  expect(prune.stdout).not.toMatch(/d1/);
  // Looking at one file only never proposes a prune.
  expect((await runShardctl(world, ["diff", "d1"])).code).toBe(0);

  await writeDefinition(world, "d1", definitionText(world, { nodes: ["l1", "l2"], desired: "stopped" }));
  const stop = await runShardctl(world, ["diff", "d1"]);
  expect(stop.code).toBe(2);
  expect(stop.stdout).toMatch(/^- d1: stop \(desired = "stopped"\)$/m);
  await ledger.remove("d1");
  await ledger.remove("orphan");
  expect((await runShardctl(world, ["diff"])).code).toBe(0);
});

test("a replace whose definition is as launched says what changed is the registry; a [plan] edit that keeps the split is in place; a definition edit says nothing more", async () => {
  await writeSettings(world, { enabled: true });
  const launchedText = definitionText(world, { nodes: ["l1", "l2"], port: await freePort(), portRange: await freePortRange(["127.0.0.1"]), register: false });
  await writeDefinition(world, "reg", launchedText);
  const launched = await revisionOf(world, "reg");
  const daemon = await startInProcessDaemon(world);
  try {
    await waitForStatus(world, "reg", (s) => isReadyAt(s, launched), 60_000);
  } finally {
    // What runs stays: the next daemon adopts it.
    await daemon.stop();
  }
  try {
    await writeSettings(world, { enabled: true, nodeMemory: "3GiB" });
    const edited = await revisionOf(world, "reg");
    const registry = await runShardctl(world, ["diff", "reg"]);
    expect(registry.code).toBe(2);
    expect(registry.stdout).toContain(
      `~ reg: replace revision ${launched.slice(0, 12)} with ${edited.slice(0, 12)} (the definition is as launched: the registry entry of one of its nodes l1, l2 in ${world.settingsFile} changed)`,
    );
    // Back to the launched registry: a [plan] setting that keeps the split is applied in place.
    await writeSettings(world, { enabled: true });
    await writeDefinition(world, "reg", `${launchedText}\n[plan]\nheadroom = 1.3\n`);
    const planned = await revisionOf(world, "reg");
    const inPlace = await runShardctl(world, ["diff", "reg"]);
    expect(inPlace.code).toBe(2);
    expect(inPlace.stdout).toContain(
      `~ reg: apply revision ${planned.slice(0, 12)} in place, no restart (what changed is not part of the launch: [router], or [plan] settings that keep the split)`,
    );
    await writeDefinition(world, "reg", launchedText.replace("context_length = 256", "context_length = 128"));
    const definition = await runShardctl(world, ["diff", "reg"]);
    expect(definition.code).toBe(2);
    expect(definition.stdout).toMatch(/^~ reg: replace revision [0-9a-f]{12} with [0-9a-f]{12}$/m);
  } finally {
    // Back to what runs, so the next daemon adopts it, then removed.
    await writeSettings(world, { enabled: true });
    await writeDefinition(world, "reg", launchedText);
    const daemon2 = await startInProcessDaemon(world);
    try {
      expect(await removeDefinition(world, "reg", 30_000)).toBe(true);
    } finally {
      await daemon2.stop();
    }
    await writeSettings(world, { enabled: false });
  }
  expect(await new Ledger(world.stateDir).read("reg")).toBeUndefined();
}, 120_000);

test("exit 1 on an invalid definition, with file:line:col", async () => {
  await writeFile(join(world.clustersDir, "broken.toml"), 'desired = "sideways"\nnodes = ["l1"]\n[model]\nid = "x"\n');
  const r = await runShardctl(world, ["diff"]);
  expect(r.code).toBe(1);
  expect(r.stderr).toMatch(/broken\.toml:1:11: /);
  await rm(join(world.clustersDir, "broken.toml"));
});

// Each of these would show a diff that builds the decision's inputs its own way: the ownership
// rule (no owner recorded, this directory, another one, one that no longer exists) and a suspended
// definition, which the table leaves alone before it asks who owns what runs.
test("diff answers as the daemon then decides: another directory's cluster, a suspended one, three of this directory", async () => {
  await writeSettings(world, { enabled: false });
  const ledger = new Ledger(world.stateDir);
  const names = ["elsewhere", "suspended", "unowned", "owned", "moved"];
  for (const name of names) await writeDefinition(world, name, definitionText(world, { nodes: ["l1", "l2"], suspend: name === "suspended" }));
  const other = join(world.root, "elsewhere");
  await mkdir(other, { recursive: true });
  const at = async (name: string, owner?: string) => ({ ...entry(name, await revisionOf(world, name)), ...(owner === undefined ? {} : { owner }) });
  await ledger.write(await at("elsewhere", other));
  await ledger.write(await at("suspended", other));
  await ledger.write(await at("unowned"));
  await ledger.write(await at("owned", world.clustersDir));
  // Launched from a folder that is gone (a checkout moved): this directory, which defines it, takes it over.
  await ledger.write(await at("moved", join(world.root, "moved-away")));

  const diff = await runShardctl(world, ["diff", ...names]);
  expect(diff.stderr).toBe("");
  expect(diff.code).toBe(2);
  expect(diff.stdout).toContain(`! elsewhere: the daemon will not act: ClusterOwnedElsewhere (it runs from ${other})\n`);
  expect(diff.stdout).not.toMatch(/suspended/);
  expect(diff.stdout).toMatch(/^- unowned: stop \(distributed serving is disabled\)$/m);
  expect(diff.stdout).toMatch(/^- owned: stop \(distributed serving is disabled\)$/m);
  expect(diff.stdout).toMatch(/^- moved: stop \(distributed serving is disabled\)$/m);

  const daemon = await startInProcessDaemon(world);
  try {
    const elsewhere = await waitForStatus(world, "elsewhere", (s) => s.health === "Stalled");
    expect(conditionOf(elsewhere, "Stalled")?.reason).toBe("ClusterOwnedElsewhere");
    await waitForStatus(world, "suspended", (s) => s.health === "Suspended");
    for (const name of ["unowned", "owned", "moved"]) await waitForStatus(world, name, (s) => s.health === "Disabled");
    // Torn down: the daemon took all three for its own, as diff did.
    expect(await ledger.read("unowned")).toBeUndefined();
    expect(await ledger.read("owned")).toBeUndefined();
    expect(await ledger.read("moved")).toBeUndefined();
    expect(await ledger.read("elsewhere")).toBeDefined();
  } finally {
    await daemon.stop();
  }
  for (const name of names) {
    await ledger.remove(name);
    await rm(join(world.clustersDir, `${name}.toml`));
    await rm(join(world.clustersDir, `${name}.status.json`), { force: true });
  }
});

test("--probe budgets the plans as the daemon does, probing only when it would; a line says which budgets were used", async () => {
  // An engine program missing on the nodes: only probing finds it, as the daemon's plan would (and stall).
  await writeDefinition(world, "p1", definitionText(world, { nodes: ["l1", "l2"], binary: join(world.root, "no-such-engine") }));
  await writeDefinition(world, "p2", definitionText(world, { nodes: ["l1", "l2"] }));
  await writeSettings(world, { enabled: true });
  const declared = await runShardctl(world, ["diff", "p1"]);
  expect(declared.code).toBe(2);
  expect(declared.stdout).toMatch(/^\+ p1: launch revision [0-9a-f]{12}$/m);
  expect(declared.stdout).toContain(
    "budgets: declared memory only (nothing probed); the daemon plans with what each node reports (free memory), capped by its declared memory: run with --probe for that plan",
  );
  const probed = await runShardctl(world, ["diff", "p1", "p2", "--probe"]);
  // A definition that cannot be planned fails the preview (exit 1), whatever else would change.
  expect(probed.code).toBe(1);
  expect(probed.stderr).toContain("a definition cannot be planned (the ! lines say why): the daemon would not apply it");
  expect(probed.stdout).toMatch(/^! p1: the daemon will not act: EngineNotFound: /m);
  expect(probed.stdout).toMatch(/^\+ p2: launch revision [0-9a-f]{12}$/m);
  expect(probed.stdout).toContain("budgets: what each node reports (free memory), capped by its declared memory: the rule the daemon plans with");

  // With distributed serving off the daemon probes nothing: neither does --probe.
  await writeSettings(world, { enabled: false });
  const off = await runShardctl(world, ["diff", "p1", "--probe"]);
  expect(off.code).toBe(0);
  expect(off.stdout).toContain("budgets: declared memory only (nothing probed), as the daemon plans while [distributed] enabled = false");
  expect(off.stdout).toContain("no differences");
  for (const name of ["p1", "p2"]) await rm(join(world.clustersDir, `${name}.toml`));
});

test("a plan that is made but does not fit: its ! line, and exit 1 (the daemon would not apply it)", async () => {
  await writeSettings(world, { enabled: false, nodeMemory: "64KiB" });
  try {
    await writeDefinition(world, "tight", definitionText(world, { nodes: ["l1", "l2"] }));
    const r = await runShardctl(world, ["diff", "tight"]);
    // Why, as the daemon's status says it: each of the plan's errors with its reason, stage and shortfall.
    expect(r.stdout).toMatch(
      /^! tight: the daemon will not act: the plan is infeasible: StageDoesNotFit: stage 0 on node "l1" \(layers \[0, 2\)\) needs .* short; its memory is 65536 bytes/m,
    );
    expect(r.stderr).toContain("a definition cannot be planned (the ! lines say why): the daemon would not apply it");
    expect(r.code).toBe(1);
  } finally {
    await rm(join(world.clustersDir, "tight.toml"));
    await writeSettings(world, {});
  }
});
