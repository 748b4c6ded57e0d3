/**
 * A definition removed while nothing of its cluster runs (its launches failed and its budget is
 * spent): its run folders are still removed from its nodes, and what a launch left listening out of
 * the teardown's reach there (a detached engine whose command names the launch's cluster config) is
 * stopped first. The daemon runs in this process on two local nodes.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { chmod, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, expect, test } from "vitest";
import { bundledShardEngineCommand } from "../../src/launch/index.js";
import { conditionOf, freePort, removeDefinition, waitForStatus } from "./daemon-fixture.js";
import { useDaemonWorld } from "./use-daemon-world.js";

const dw = useDaemonWorld({ settings: { enabled: true, restartBudget: 1 } });
let orphan: ChildProcess | undefined;
afterAll(() => void orphan?.kill("SIGKILL"));

test("a stalled cluster's definition removed: its run folders go, and a listener its launch left there is stopped", async () => {
  const { world } = dw;
  // An engine that fails at once (its version query is the real engine's).
  const fails = join(world.root, "fails.sh");
  const engine = bundledShardEngineCommand.map((arg) => JSON.stringify(arg)).join(" ");
  await writeFile(fails, `#!/bin/sh\ncase " $* " in *" --version "*) exec ${engine} "$@" ;; esac\necho "cannot open the model" >&2\nexit 3\n`);
  await chmod(fails, 0o755);
  await dw.define("broken", { nodes: ["l1", "l2"], binary: fails });
  const stalled = await waitForStatus(world, "broken", (s) => s.health === "Stalled", 60_000);
  expect(conditionOf(stalled, "Stalled")?.reason).toBe("RestartBudgetExhausted");
  const runDir = join(world.root, "nodes", "l1", ".shardctl", "run", "broken");
  expect(existsSync(join(runDir, "cluster.toml"))).toBe(true);
  // What a detached engine of that launch would be: listening, its command naming the cluster config.
  const port = await freePort();
  orphan = spawn(
    process.execPath,
    ["-e", `require("node:http").createServer(() => {}).listen(${port}, "127.0.0.1", () => console.log("up"))`, join(runDir, "cluster.toml")],
    {
      stdio: ["ignore", "pipe", "ignore"],
    },
  );
  await new Promise<void>((resolve) => orphan!.stdout!.once("data", () => resolve()));
  const gone = new Promise((resolve) => orphan!.once("exit", resolve));
  expect(await removeDefinition(world, "broken", 30_000)).toBe(true);
  await gone;
  expect(existsSync(runDir)).toBe(false);
  expect(existsSync(join(world.root, "nodes", "l2", ".shardctl", "run", "broken"))).toBe(false);
}, 120_000);
