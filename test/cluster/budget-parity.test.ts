/**
 * One budget rule for `shardctl plan`, `shardctl plan --probe` and the daemon: a node's budget is
 * what it reports (free memory) capped by its declared memory; unprobed, its declared memory.
 * Regression: `plan` budgeted with the declared memory and the daemon with the probed free memory,
 * so on nodes declaring another figure than they report the two made different `memory` splits.
 * Two local nodes of this machine: l1 declares 1 GiB (less than this machine has free, so the
 * declared figure caps what it reports), l2 declares 1 TiB (more, so what it reports decides).
 * Run `npm run build` first.
 */
import { readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, expect, test } from "vitest";
import type { Daemon } from "../../src/reconciler/index.js";
import {
  definitionText,
  enginesOf,
  freePort,
  freePortRange,
  isReadyAt,
  readStatusFile,
  revisionOf,
  runShardctl,
  sleep,
  startInProcessDaemon,
  startWorld,
  waitForStatus,
  writeDefinition,
  writeSettings,
  type DaemonWorld,
} from "../reconciler/daemon-fixture.js";

const GiB = 2 ** 30;
/** The reference engine's headroom divisor. */
const headroom = 1.2;

interface PlanJson {
  plan: { stages: Array<{ node: string; layers: [number, number]; budgetBytes: number; budgetSource: string }> };
  budgets: { from: string; rule: string; daemon?: { revision: string; stages: Array<{ node: string; budgetBytes: number; budgetSource: string }> } };
}

let world: DaemonWorld;
let daemon: Daemon | undefined;

beforeAll(async () => {
  world = await startWorld();
  await writeSettings(world, { enabled: true });
  const settings = await readFile(world.settingsFile, "utf8");
  const [l1, l2] = settings.split("[nodes.l2]");
  await writeFile(world.settingsFile, `${l1!.replace('memory = "4GiB"', 'memory = "1GiB"')}[nodes.l2]${l2!.replace('memory = "4GiB"', 'memory = "1TiB"')}`);
  const text = definitionText(world, { nodes: ["l1", "l2"], port: await freePort(), portRange: await freePortRange(["127.0.0.1"]) });
  await writeDefinition(world, "budget", `${text}\n[plan]\nstrategy = "memory"\n`);
});

afterAll(async () => {
  if (daemon !== undefined) {
    await rm(join(world.clustersDir, "budget.toml"), { force: true });
    const deadline = Date.now() + 20_000;
    while ((await readStatusFile(world, "budget")) !== undefined && Date.now() < deadline) await sleep(100);
    await daemon.stop();
  }
  const left = world === undefined ? [] : await enginesOf(world);
  await world?.close();
  expect(left).toEqual([]);
});

async function planJson(...flags: string[]): Promise<PlanJson> {
  const run = await runShardctl(world, ["plan", "budget", "--json", ...flags]);
  expect(run.code, run.stderr).toBe(0);
  return JSON.parse(run.stdout) as PlanJson;
}

const shape = (stages: ReadonlyArray<{ node: string; layers: readonly number[] }>) => stages.map((s) => [s.node, s.layers[0], s.layers[1]]);

test("plan, plan --probe and the daemon budget by the same rule and make the same memory split", async () => {
  // Declared figures only: l1's 1 GiB against l2's 1 TiB, so l1 gets the fewest layers it can.
  const declared = await planJson();
  expect(declared.plan.stages.map((s) => s.budgetSource)).toEqual(["declared", "declared"]);
  expect(declared.plan.stages[0]!.budgetBytes).toBe(Math.floor(GiB / headroom));
  expect(shape(declared.plan.stages)).toEqual([
    ["l1", 0, 1],
    ["l2", 1, 4],
  ]);
  expect(declared.budgets).toMatchObject({ from: "declared" });
  expect(declared.budgets.rule).toContain("the daemon plans with what each node reports (free memory), capped by its declared memory");

  // Probed: l1 reports more than it declares (capped at 1 GiB), l2 less (what it reports counts).
  const probed = await planJson("--probe");
  expect(probed.plan.stages.map((s) => s.budgetSource)).toEqual(["probed-capped-by-declared", "probed"]);
  expect(probed.plan.stages[0]!.budgetBytes).toBe(Math.floor(GiB / headroom));
  expect(probed.plan.stages[1]!.budgetBytes).toBeLessThan(Math.floor((1024 * GiB) / headroom));
  expect(shape(probed.plan.stages)).toEqual(shape(declared.plan.stages));
  const human = await runShardctl(world, ["plan", "budget", "--probe"]);
  expect(human.stdout).toMatch(/^STAGE\s+NODE\s+LAYERS\s+WEIGHTS\s+KV\s+TOTAL\s+BUDGET\s+SOURCE\s+FIT$/m);
  expect(human.stdout).toMatch(/^0\s+l1\s+\[0, 1\).*\s853\.3 MiB\s+probed, capped by declared\s+\[/m);
  expect(human.stdout).toMatch(/^1\s+l2\s+\[1, 4\).*\sGiB\s+probed\s+\[/m);

  // The daemon: the same split, the same sources, the same capped budget, in its status file.
  const revision = await revisionOf(world, "budget");
  daemon = await startInProcessDaemon(world);
  const status = await waitForStatus(world, "budget", (s) => isReadyAt(s, revision), 40_000);
  expect(shape(status.plan!.stages)).toEqual(shape(probed.plan.stages));
  expect(status.plan!.stages.map((s) => s.budgetSource)).toEqual(["probed-capped-by-declared", "probed"]);
  expect(status.plan!.stages[0]!.budgetBytes).toBe(probed.plan.stages[0]!.budgetBytes);

  // `plan` without --probe now also says what the daemon's budgets were.
  const after = await planJson();
  expect(after.budgets.daemon?.revision).toBe(revision);
  expect(after.budgets.daemon?.stages.map((s) => [s.node, s.budgetBytes, s.budgetSource])).toEqual(
    status.plan!.stages.map((s) => [s.node, s.budgetBytes, s.budgetSource]),
  );
  const text = await runShardctl(world, ["plan", "budget"]);
  expect(text.stdout).toContain(`the daemon's plan of revision ${revision.slice(0, 12)} budgeted: stage 0 on l1 853.3 MiB (probed, capped by declared), stage 1 on l2 `);
  expect(text.stdout).toMatch(/stage 1 on l2 [\d.]+ GiB \(probed\)/);
});
