/**
 * A damaged ledger entry (a disk fault, a hand edit) leaves the daemon running and the cluster
 * alone: its status says the entry cannot be read, names the file and what to do, and the daemon
 * neither launches nor tears anything down on a guess; once the file is dealt with, `shardctl
 * reconcile` brings the cluster up. The daemon runs in this process on two local nodes.
 */
import { mkdir, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { expect, test } from "vitest";
import { dropReconcileRequest } from "../../src/reconciler/index.js";
import { loadSettings } from "../../src/spec/index.js";
import { conditionOf, enginesOf, isReadyAt, waitForStatus } from "./daemon-fixture.js";
import { useDaemonWorld } from "./use-daemon-world.js";

// The test starts the daemon once the damaged entry is in place.
const dw = useDaemonWorld({ settings: { enabled: true, restartBudget: 2 }, daemon: "none" });

test("a damaged ledger entry: the daemon starts, the cluster's status names the file and what to do, nothing is launched until it is dealt with", async () => {
  const { world } = dw;
  const ledgerFile = join(world.stateDir, "ledger", "damaged.json");
  await mkdir(join(world.stateDir, "ledger"), { recursive: true });
  await writeFile(ledgerFile, '{"broken');
  await dw.define("damaged", { nodes: ["l1", "l2"] });
  await dw.startDaemon();
  const stalled = await waitForStatus(world, "damaged", (s) => s.health === "Stalled");
  expect(conditionOf(stalled, "Stalled")).toMatchObject({ status: "True", reason: "LedgerEntryUnreadable" });
  expect(conditionOf(stalled, "Stalled")?.message).toContain(`${ledgerFile} cannot be read: it is not JSON`);
  expect(conditionOf(stalled, "Stalled")?.message).toContain("shardctl reconcile damaged");
  expect(await enginesOf(world)).toEqual([]);

  await rm(ledgerFile);
  await dropReconcileRequest((await loadSettings(world.settingsFile)).daemon.stateDir, "damaged");
  await waitForStatus(world, "damaged", (s) => isReadyAt(s), 90_000);
}, 180_000);
