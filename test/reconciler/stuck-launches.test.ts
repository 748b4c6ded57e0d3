/**
 * Launches that only wait on their engines (here four whose stages never listen, as a stuck or
 * slowly loading engine does) must not hold back another cluster's passes: the daemon runs four
 * passes at once, and a waiting launch gives its slot back. A served cluster deleted meanwhile is
 * torn down, deregistered and its status file removed within seconds, not once the stuck launches
 * reach their deadline (here 90 s). The daemon runs in this process on two local nodes.
 */
import { chmod, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { expect, test } from "vitest";
import { bundledShardEngineCommand, Ledger } from "../../src/launch/index.js";
import { conditionOf, removeDefinition, waitForStatus } from "./daemon-fixture.js";
import { useDaemonWorld } from "./use-daemon-world.js";

const dw = useDaemonWorld({ settings: { enabled: true, router: true }, launch: { stageListenMs: 90_000 } });

test("a served cluster deleted while four launches wait on engines that never listen is torn down within seconds", async () => {
  const { world } = dw;
  const served = await dw.define("served", { nodes: ["l1", "l2"], register: true });
  await dw.waitServing("served", served, 90_000);
  // An engine that starts and never listens (its version query is the real engine's).
  const neverListens = join(world.root, "never-listens.sh");
  const engine = bundledShardEngineCommand.map((arg) => JSON.stringify(arg)).join(" ");
  await writeFile(neverListens, `#!/bin/sh\ncase " $* " in *" --version "*) exec ${engine} "$@" ;; esac\nexec sleep 600\n`);
  await chmod(neverListens, 0o755);
  const stuck = ["stuck-1", "stuck-2", "stuck-3", "stuck-4"];
  for (const name of stuck) await dw.define(name, { nodes: ["l1", "l2"], binary: neverListens });
  for (const name of stuck) {
    await waitForStatus(world, name, (s) => s.timeline.some((e) => e.step === "stage-0-started") && conditionOf(s, "Ready")?.reason === "Launching", 60_000);
  }
  const removedAt = Date.now();
  expect(await removeDefinition(world, "served", 20_000)).toBe(true);
  expect(Date.now() - removedAt).toBeLessThan(20_000);
  expect(await new Ledger(world.stateDir).read("served")).toBeUndefined();
  expect(await readFile(world.routerConfig, "utf8")).not.toContain("served");
  // The stuck launches still wait: nothing else ended them, and their conditions say what goes on.
  for (const name of stuck) {
    const status = await waitForStatus(world, name, () => true);
    expect(conditionOf(status, "Ready")?.reason).toBe("Launching");
    expect(conditionOf(status, "Stalled")).toMatchObject({ status: "False", reason: "Launching", message: "the daemon is launching this revision (launch 1 of 3)" });
    expect(conditionOf(status, "StagesListening")).toMatchObject({ status: "False", reason: "Launching", message: "0 of 2 stages listen; the launch brings them up" });
  }
  for (const name of stuck) expect(await removeDefinition(world, name, 30_000)).toBe(true);
}, 240_000);
