/** `shardctl plan` on definitions: human, --json, --markdown, --detailed-exitcode (0/1/2). Run `npm run build` first. */
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, expect, test } from "vitest";
import {
  definitionText,
  readStatusFile,
  runShardctl,
  startInProcessDaemon,
  startWorld,
  waitForStatus,
  writeDefinition,
  type DaemonWorld,
} from "../reconciler/daemon-fixture.js";

let world: DaemonWorld;
beforeAll(async () => {
  world = await startWorld();
  await writeDefinition(world, "p1", definitionText(world, { nodes: ["l1", "l2"] }));
});
afterAll(async () => {
  await world?.close();
});

test("human output: the stages, layers and fit; exit 0", async () => {
  const r = await runShardctl(world, ["plan", "p1"]);
  expect(r.stderr).toBe("");
  expect(r.code).toBe(0);
  expect(r.stdout).toContain("cluster p1 (");
  expect(r.stdout).toMatch(/l1/);
  expect(r.stdout).toMatch(/l2/);
});

test("--probe: budgets from what the nodes report, capped by what they declare (as the daemon plans)", async () => {
  type Out = { plan: { stages: Array<{ budgetBytes: number; budgetSource: string }> }; budgets: { from: string; rule: string } };
  const declared = JSON.parse((await runShardctl(world, ["plan", "p1", "--json"])).stdout) as Out;
  const probed = JSON.parse((await runShardctl(world, ["plan", "p1", "--json", "--probe"])).stdout) as Out;
  // l1 and l2 declare 4 GiB; this machine reports other free memory, which the declared 4 GiB caps.
  expect(declared.plan.stages[0]).toMatchObject({ budgetBytes: Math.floor((4 * 2 ** 30) / 1.2), budgetSource: "declared" });
  expect(declared.budgets.from).toBe("declared");
  expect(probed.budgets.from).toBe("probed");
  expect(probed.plan.stages[0]!.budgetBytes).toBeLessThanOrEqual(declared.plan.stages[0]!.budgetBytes);
  expect(["probed", "probed-capped-by-declared"]).toContain(probed.plan.stages[0]!.budgetSource);
  const human = await runShardctl(world, ["plan", "p1", "--probe"]);
  expect(human.code).toBe(0);
  expect(human.stdout).toContain("budgets: what each node reports (free memory), capped by its declared memory: the rule the daemon plans with");
  // Without --probe, and distributed serving off: the daemon plans from the declared figures too.
  const plain = await runShardctl(world, ["plan", "p1"]);
  expect(plain.stdout).toContain("budgets: declared memory only (nothing probed), as the daemon plans while [distributed] enabled = false");
});

test("--json: the plan as data", async () => {
  const r = await runShardctl(world, ["plan", "p1", "--json"]);
  expect(r.code).toBe(0);
  const out = JSON.parse(r.stdout) as { cluster: string; plan: { feasible: boolean; stages: Array<{ node: string; layers: [number, number] }> } };
  expect(out.cluster).toBe("p1");
  expect(out.plan.feasible).toBe(true);
  expect(out.plan.stages.map((s) => [s.node, s.layers])).toEqual([
    ["l1", [0, 2]],
    ["l2", [2, 4]],
  ]);
});

test("--markdown: a section per cluster (for PR comments)", async () => {
  const r = await runShardctl(world, ["plan", join(world.clustersDir, "p1.toml"), "--markdown"]);
  expect(r.code).toBe(0);
  expect(r.stdout).toContain("### Cluster `p1`");
  expect(r.stdout).toMatch(/\|.*l1.*\|/);
  expect(await runShardctl(world, ["plan", "p1", "--json", "--markdown"])).toMatchObject({ code: 1 });
});

test("--detailed-exitcode: 2 while the status file records no or another plan, 0 once it records this one", async () => {
  const first = await runShardctl(world, ["plan", "p1", "--detailed-exitcode"]);
  expect(first.code).toBe(2);
  // Exit 2 says why: here, nothing to compare with.
  expect(first.stderr).toMatch(/^plan of p1: there is no status file to compare with \(.*p1\.status\.json\): no daemon has planned this cluster yet$/m);
  const daemon = await startInProcessDaemon(world);
  try {
    await waitForStatus(world, "p1", (s) => s.plan !== undefined);
  } finally {
    await daemon.stop();
  }
  expect((await runShardctl(world, ["plan", "p1", "--detailed-exitcode"])).code).toBe(0);
  // Without the flag, a difference is still exit 0.
  await writeDefinition(world, "p1", definitionText(world, { nodes: ["l2", "l1"] }));
  expect((await runShardctl(world, ["plan", "p1"])).code).toBe(0);
  const changed = await runShardctl(world, ["plan", "p1", "--detailed-exitcode"]);
  expect(changed.code).toBe(2);
  expect(changed.stderr).toMatch(/^plan of p1: the split differs from the one .*p1\.status\.json records: l1 0-\d+, l2 \d+-\d+ → l2 0-\d+, l1 \d+-\d+$/m);
  expect((await readStatusFile(world, "p1"))?.plan?.stages[0]?.node).toBe("l1");
});

test("exit 1 on an invalid definition (file:line:col) and on an infeasible plan", async () => {
  await writeFile(join(world.clustersDir, "bad.toml"), 'desired = "running"\nnodes = ["l1", "nope"]\n[model]\nid = "x"\nsource = "path"\n');
  const bad = await runShardctl(world, ["plan", "bad", "--detailed-exitcode"]);
  expect(bad.code).toBe(1);
  expect(bad.stdout).toMatch(/bad\.toml:2:\d+: .*nope/);
  await writeDefinition(world, "huge", definitionText(world, { nodes: ["l1", "l2"] }).replace("context_length = 256", "context_length = 16000000"));
  const huge = await runShardctl(world, ["plan", "huge"]);
  expect(huge.code).toBe(1);
  expect(huge.stdout).toMatch(/[Ii]nfeasible|does not fit|exceeds/);
});
