/**
 * A damaged ledger entry (a disk fault, a hand edit) leaves the daemon running and the cluster
 * alone: its status says the entry cannot be read, names the file and what to do, and the daemon
 * neither launches nor tears anything down on a guess; once the file is dealt with, `shardctl
 * reconcile` brings the cluster up. The daemon runs in this process on two local nodes.
 */
import { mkdir, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, expect, test } from "vitest";
import type { Daemon } from "../../src/reconciler/index.js";
import { dropReconcileRequest } from "../../src/reconciler/index.js";
import { loadSettings } from "../../src/spec/index.js";
import {
  conditionOf,
  definitionText,
  enginesOf,
  freePort,
  freePortRange,
  isReadyAt,
  removeDefinition,
  startInProcessDaemon,
  startWorld,
  waitForStatus,
  writeDefinition,
  writeSettings,
  type DaemonWorld,
} from "./daemon-fixture.js";

let world: DaemonWorld;
let daemon: Daemon | undefined;

beforeAll(async () => {
  world = await startWorld();
  await writeSettings(world, { enabled: true, restartBudget: 2 });
});

afterAll(async () => {
  if (world !== undefined && daemon !== undefined) await removeDefinition(world, "damaged", 60_000);
  await daemon?.stop();
  if (world !== undefined) {
    expect(await enginesOf(world)).toEqual([]);
    await world.close();
  }
}, 120_000);

test("a damaged ledger entry: the daemon starts, the cluster's status names the file and what to do, nothing is launched until it is dealt with", async () => {
  const ledgerFile = join(world.stateDir, "ledger", "damaged.json");
  await mkdir(join(world.stateDir, "ledger"), { recursive: true });
  await writeFile(ledgerFile, '{"broken');
  await writeDefinition(world, "damaged", definitionText(world, { nodes: ["l1", "l2"], port: await freePort(), portRange: await freePortRange(["127.0.0.1"]) }));
  daemon = await startInProcessDaemon(world);
  const stalled = await waitForStatus(world, "damaged", (s) => s.health === "Stalled");
  expect(conditionOf(stalled, "Stalled")).toMatchObject({ status: "True", reason: "LedgerEntryUnreadable" });
  expect(conditionOf(stalled, "Stalled")?.message).toContain(`${ledgerFile} cannot be read: it is not JSON`);
  expect(conditionOf(stalled, "Stalled")?.message).toContain("shardctl reconcile damaged");
  expect(await enginesOf(world)).toEqual([]);

  await rm(ledgerFile);
  await dropReconcileRequest(await loadSettings(world.settingsFile), "damaged");
  await waitForStatus(world, "damaged", (s) => isReadyAt(s), 90_000);
}, 180_000);
