/**
 * A state directory that takes no writes (a full disk, a read-only remount) when a stage dies: the
 * broken pipeline is still withdrawn from the router and every process of it stopped, at once; the
 * status says the ledger could not be updated, where, and what to do; once the directory takes
 * writes again the cluster is relaunched. The ledger directory is made read-only with a bind
 * mount (root; a read-only file system refuses root as it refuses anyone). The daemon runs in this
 * process on two local nodes, with the embedded router.
 */
import { execFile } from "node:child_process";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { expect, test } from "vitest";
import { isRunning } from "../support/namespaces.js";
import { killStage, waitForStatus } from "./daemon-fixture.js";
import { useDaemonWorld } from "./use-daemon-world.js";

const run = promisify(execFile);
const dw = useDaemonWorld({ settings: { enabled: true, router: true } });

test("a stage dies while the ledger cannot be written: withdrawn and stopped all the same, said, and relaunched once it can", async () => {
  if (process.getuid?.() !== 0) throw new Error("this test bind-mounts the ledger directory read-only: run it as root");
  const { world } = dw;
  const revision = await dw.define("ro", { nodes: ["l1", "l2"], register: true });
  const serving = await dw.waitServing("ro", revision);
  const pids = [...serving.stages.map((s) => s.pid!), serving.coordinator!.pid!];
  expect(await readFile(world.routerConfig, "utf8")).toContain(serving.coordinator!.url);

  const ledgerDir = join(world.stateDir, "ledger");
  await run("mount", ["--bind", ledgerDir, ledgerDir]);
  let mounted = true;
  try {
    await run("mount", ["-o", "remount,ro,bind", ledgerDir]);
    await killStage(serving, 0);
    // Every process of the broken pipeline stopped, and its router entry gone, within seconds.
    const deadline = Date.now() + 20_000;
    while (pids.some(isRunning) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    expect(pids.filter(isRunning)).toEqual([]);
    expect(await readFile(world.routerConfig, "utf8")).not.toContain(serving.coordinator!.url);
    const said = await waitForStatus(world, "ro", (s) => s.lastError?.reason === "TeardownFailed", 20_000);
    expect(said.lastError?.message).toContain(`its ledger entry in ${ledgerDir} could not be updated`);
    expect(said.lastError?.message).toMatch(/every process stopped, its router entry removed/);

    await run("umount", [ledgerDir]);
    mounted = false;
    const again = await dw.waitServing("ro", revision, 90_000);
    expect(again.stages.map((s) => s.pid)).not.toContain(serving.stages[0]!.pid);
  } finally {
    if (mounted) await run("umount", [ledgerDir]).catch(() => undefined);
  }
}, 180_000);
