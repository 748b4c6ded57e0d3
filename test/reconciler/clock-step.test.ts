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
    // Engines that take 4 s to start (the stages, then the coordinator): the step, made once stage-0
    // is started, comes while the launch waits for it to listen.
    const revision = await dw.define(name, { nodes: ["n1", "n2"], binary: await writeSlowEngine(world, 4) });
    // Once stage-0 is started, while the launch waits for it to listen.
    await waitForStatus(world, name, (s) => conditionOf(s, "Ready")?.reason === "Launching" && s.timeline.some((e) => e.step === "stage-0-started"), 60_000);
    const steppedAt = Date.now();
    await writeFile(clock, `${step}\n`);
    const ready = await waitForStatus(world, name, (s) => isReadyAt(s, revision), 90_000);
    expect(ready.restarts?.count ?? 1).toBe(1);
    // No launch failed on the way (a wait the step ended early fails as a timeout, which a link fault's
    // refund would leave uncounted).
    expect(ready.history.filter((h) => h.result === "failed").map((h) => `${h.action}: ${h.reason ?? ""}`)).toEqual([]);
    expect(ready.history.every((h) => h.durationMs >= 0 && h.durationMs < 120_000)).toBe(true);
    // The step came while the launch waited for its stages, not after: the daemon said them listening
    // on the stepped clock (else this test would prove nothing).
    const listening = ready.timeline.filter((e) => /^stage-\d+-listening$/.test(e.step)).map((e) => Date.parse(e.at) - steppedAt);
    expect(listening).toHaveLength(2);
    for (const offsetMs of listening) expect(step === "+1h" ? offsetMs > 30 * 60_000 : offsetMs < -30 * 60_000, `${offsetMs} ms`).toBe(true);
    expect(await removeDefinition(world, name, 60_000)).toBe(true);
    daemon.child.kill("SIGTERM");
    await daemon.exited;
  }, 240_000);
}
