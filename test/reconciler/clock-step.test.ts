/**
 * The daemon host's wall clock stepped while a cluster launches (NTP correcting a clock that was an
 * hour off, a VM resumed): what the daemon times — the pass, the launch's waits — is timed by the
 * monotonic clock, which a step does not move. Regression: a pass that spanned a step back of an
 * hour was recorded as lasting -3 567 845 ms, which the status schema refuses, so every later write
 * of the status file failed and it stayed on "Launching" while the cluster served (CI's `wait`
 * failed); a step forward ended a launch's waits at once as timeouts (StageListenTimeout, counted).
 * The daemon runs under libfaketime with its clock read from a file at every call, the monotonic
 * clock left alone (FAKETIME_DONT_FAKE_MONOTONIC), as a real step leaves it.
 */
import { existsSync } from "node:fs";
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { beforeAll, expect, test } from "vitest";
import { conditionOf, isReadyAt, removeDefinition, waitForStatus, writeSlowEngine } from "./daemon-fixture.js";
import { useDaemonWorld } from "./use-daemon-world.js";
import { aptInstall } from "../support/apt.js";

const libfaketime = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";

beforeAll(async () => {
  if (existsSync(libfaketime)) return;
  if (process.getuid?.() !== 0) throw new Error('libfaketime is missing: install the "faketime" package (apt-get install -y faketime)');
  await aptInstall(["faketime"]);
  if (!existsSync(libfaketime)) throw new Error(`installing "faketime" did not provide ${libfaketime}`);
}, 15 * 60_000);

const dw = useDaemonWorld({ sshNodes: 2, settings: { restartBudget: 3 }, daemon: "none" });

for (const step of ["-1h", "+1h"]) {
  test(`a step of ${step} while the stages start: the launch waits them out, the status file says Ready, and the pass has a length`, async () => {
    const { world } = dw;
    const clock = join(world.root, `clock${step}`);
    await writeFile(clock, "+0\n");
    const daemon = await dw.spawnDaemon({
      env: { LD_PRELOAD: libfaketime, FAKETIME_TIMESTAMP_FILE: clock, FAKETIME_NO_CACHE: "1", FAKETIME_DONT_FAKE_MONOTONIC: "1" },
    });
    const name = `clock${step === "-1h" ? "back" : "ahead"}`;
    // Stages that take 8 s to start: the step, made once the status says Launching, comes while the launch waits for them.
    const revision = await dw.define(name, { nodes: ["n1", "n2"], binary: await writeSlowEngine(world, 8) });
    await waitForStatus(world, name, (s) => conditionOf(s, "Ready")?.reason === "Launching", 60_000);
    await writeFile(clock, `${step}\n`);
    const ready = await waitForStatus(world, name, (s) => isReadyAt(s, revision), 90_000);
    expect(ready.restarts?.count ?? 1).toBe(1);
    expect(ready.history.every((h) => h.durationMs >= 0 && h.durationMs < 120_000)).toBe(true);
    expect(await removeDefinition(world, name, 60_000)).toBe(true);
    daemon.child.kill("SIGTERM");
    await daemon.exited;
  }, 240_000);
}
