/**
 * Reconcile requests in quick succession (a double click on "Reconcile now", two `shardctl
 * reconcile`s): each is taken. A request file dropped right after the daemon removed the one
 * before it comes to the daemon's directory watcher as a rewrite of that file, not a new one.
 */
import { mkdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { beforeAll, expect, it } from "vitest";
import { requestsDirOf } from "../../src/reconciler/index.js";
import { dropReconcileRequest, requestTaken } from "../../src/reconciler/reconcile-request.js";
import { loadSettings } from "../../src/spec/index.js";
import { definitionText, sleep, waitForStatus, writeDefinition } from "./daemon-fixture.js";
import { useDaemonWorld } from "./use-daemon-world.js";

const dw = useDaemonWorld({ prepare: async (world) => void (await writeDefinition(world, "alpha", definitionText(world, { nodes: ["l1"] }))) });

beforeAll(async () => {
  await waitForStatus(dw.world, "alpha", (s) => s.plan !== undefined);
  await dw.daemon.whenIdle();
});

it("takes each of five requests dropped one right after the other was taken", async () => {
  const settings = await loadSettings(dw.world.settingsFile);
  for (let i = 0; i < 5; i++) {
    const request = await dropReconcileRequest(settings.daemon.stateDir, "alpha");
    expect(await requestTaken(request, 5_000), `request ${i + 1} was not taken within 5 s`).toBe(true);
  }
});

it("a folder in the requests directory is said once and left alone; requests beside it are still taken", async () => {
  const settings = await loadSettings(dw.world.settingsFile);
  await mkdir(join(requestsDirOf(settings.daemon.stateDir), "not-a-request"));
  // Three looks of the directory (one a second).
  await sleep(3_500);
  const request = await dropReconcileRequest(settings.daemon.stateDir, "alpha");
  expect(await requestTaken(request, 5_000)).toBe(true);
  const log = await readFile(join(dw.world.root, "daemon.log"), "utf8");
  expect(log.split("\n").filter((line) => line.includes("ignoring this entry of the requests directory"))).toHaveLength(1);
});
