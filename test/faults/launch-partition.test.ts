/**
 * A stage host partitioned during a launch, between its stage's start and its listening, on a lab
 * of network namespaces (test/faults/support/netns.ts): the daemon and the coordinator in the root
 * namespace, stage hosts n1 and n2 each in its own namespace with its own sshd (iptables DROP both
 * ways: no FIN, no RST). In the first launch n2's stage (stage-1) waits 3 s before it becomes
 * shard-engine, so the cut lands before it can listen; every other process, and every process of the
 * launch after the heal, starts at once. The daemon's stage listen deadline is 8 s rather than the
 * fixture's 15 s: the launch waits it out, and healthy stages here listen within 1-3 s of their start.
 *
 * The launch fails as StageListenTimeout within its deadline (each liveness probe of the silent
 * node is bounded), and its message says the node did not answer rather than only that the stage
 * did not listen; it is all or nothing: n1's stage is stopped, nothing is registered, Ready is never
 * True, and n2's stage stays in the ledger as the one leftover (phase `tearing-down`) while n2 is
 * cut off, without using up the restart budget. After the heal the leftover is stopped before
 * anything is launched again, and the cluster converges with new processes.
 */
import { mkdir, readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { expect, it } from "vitest";
import { bundledShardEngineCommand } from "../../src/launch/index.js";
import type { ClusterStatus } from "../../src/reconciler/index.js";
import { chat, conditionOf, sleep } from "../reconciler/daemon-fixture.js";
import { useLabCluster } from "./support/lab-cluster.js";
import { enginePids, routerBackends, until } from "./support/world-checks.js";

/** The daemon's stage listen deadline (the fixture's fastLaunch has 15 s). */
const listenDeadlineMs = 8_000;
const cluster = useLabCluster("launchcut", { hosts: 2, layers: 4, restartBudget: 3, cutOff: 1, launch: { stageListenMs: listenDeadlineMs } });

function eventAt(status: ClusterStatus, step: string): number | undefined {
  const found = status.timeline.find((e) => e.step === step);
  return found === undefined ? undefined : Date.parse(found.at);
}

/** An engine binary whose stage-1 waits `delaySeconds` before it becomes shard-engine while `flag` exists; every other process starts at once. */
async function stage1DelayedEngine(flag: string, delaySeconds: number): Promise<string> {
  const path = join(cluster.world.root, "bin", "delays-stage-1.sh");
  await mkdir(join(cluster.world.root, "bin"), { recursive: true });
  const engine = bundledShardEngineCommand.map((arg) => JSON.stringify(arg)).join(" ");
  await writeFile(path, `#!/bin/sh\ncase " $* " in *" --node-id stage-1 "*) [ -e ${JSON.stringify(flag)} ] && sleep ${delaySeconds} ;; esac\nexec ${engine} "$@"\n`, {
    mode: 0o755,
  });
  return path;
}

it("a stage host partitioned while its stage starts: the launch fails within its deadline naming the silent node, all or nothing; its leftover is stopped after the heal", async () => {
  const n2 = cluster.lab.hosts[1]!;
  const delayFlag = join(cluster.world.root, "delay-stage-1");
  await writeFile(delayFlag, "");
  await cluster.define({ binary: await stage1DelayedEngine(delayFlag, 3) });

  // n2's stage started (its pid in the ledger): cut n2 off while the launch waits for it.
  await until(async () => (await cluster.ledger())?.processes.some((p) => p.node === "n2" && p.pid > 0) === true, 30_000, "n2's stage started", 25);
  const first = (await cluster.ledger())!;
  const n1Stage = first.processes.find((p) => p.node === "n1")!.pid;
  const n2Stage = first.processes.find((p) => p.node === "n2")!.pid;
  await n2.partition();
  try {
    const failed = await cluster.waitFor((s) => s.timeline.some((e) => e.step === "launch-failed"), 40_000);
    const lastListening = Math.max(...failed.timeline.filter((e) => /^stage-\d+-(started|listening)$/.test(e.step)).map((e) => Date.parse(e.at)));
    const failedAt = eventAt(failed, "launch-failed")!;
    // n2's stage is long past its delay: the launch after the heal starts every process at once.
    await rm(delayFlag);
    // The wait for n2's stage began at the last start or listening event before it; the failure comes at its deadline.
    expect(failedAt - lastListening).toBeLessThan(listenDeadlineMs + 3_000);
    const detail = failed.timeline.find((e) => e.step === "launch-failed")!.detail ?? "";
    expect(detail).toMatch(new RegExp(`^StageListenTimeout at stage-1-listen: stage-1 on n2 did not listen on \\S+ within ${listenDeadlineMs} ms`));
    expect(detail).toContain("node n2 has not answered its liveness probes");
    console.log(`launch partition: failed ${failedAt - lastListening} ms after the wait on n2 began (deadline ${listenDeadlineMs} ms): ${detail}`);

    // All or nothing: n1's stage stopped, nothing registered, n2's stage the one leftover.
    await until(async () => (await cluster.ledger())?.processes.every((p) => p.node === "n2") === true, 15_000, "only n2's stage left in the ledger");
    expect(await enginePids(cluster.world)).not.toContain(n1Stage);
    expect(await routerBackends(cluster.world)).not.toContain("url:");
    const ledger = (await cluster.ledger())!;
    expect(ledger.phase).toBe("tearing-down");
    expect(ledger.processes.map((p) => p.pid)).toEqual([n2Stage]);
    const cutOff = await cluster.waitFor((s) => s.lastError !== undefined, 10_000);
    expect(conditionOf(cutOff, "Ready")?.status).toBe("False");
    // Passes keep retrying the leftover while n2 is cut off: two more failed passes (begun after the
    // launch failed), and until then never Ready, no new launch counted, n2's stage the one leftover.
    // Each failed pass stamps lastError anew (the history folds repeated passes of some actions into one).
    const failuresSeen = new Set<string>();
    const end = Date.now() + 30_000;
    for (;;) {
      const s = await cluster.status();
      expect(conditionOf(s, "Ready")?.status).not.toBe("True");
      expect(s.restarts?.count).toBe(1);
      expect((await cluster.ledger())?.processes.map((p) => p.pid)).toEqual([n2Stage]);
      if (s.lastError !== undefined && Date.parse(s.lastError.at) > failedAt) failuresSeen.add(s.lastError.at);
      if (failuresSeen.size >= 2) break;
      expect(Date.now(), `two more failed passes while n2 is cut off; last error: ${JSON.stringify(s.lastError)}`).toBeLessThan(end);
      await sleep(200);
    }
  } finally {
    await n2.heal();
  }

  const ready = await cluster.waitForReady(90_000);
  const pids = await enginePids(cluster.world);
  expect(pids).not.toContain(n2Stage);
  expect(pids).not.toContain(n1Stage);
  expect((await cluster.ledger())?.processes.map((p) => p.pid)).not.toContain(n2Stage);
  expect(await chat(`http://127.0.0.1:${new URL(ready.coordinator!.url).port}`, cluster.world.modelDir)).toBeTypeOf("string");
  expect(cluster.world.audit.problems).toEqual([]);
}, 180_000);

it("the data path to a stage host cut while its control channel works: the stage runs but its port is silent, so the launch fails naming the path (StageLinkUnreachable), not counted against the budget; it converges after the heal", async () => {
  const n2 = cluster.lab.hosts[1]!;
  const delayFlag = join(cluster.world.root, "delay-stage-1");
  await writeFile(delayFlag, "");
  // Another binary path than the first test's: a changed definition, so the cluster is replaced.
  const path = await stage1DelayedEngine(delayFlag, 3);
  const other = join(cluster.world.root, "bin", "delays-stage-1-again.sh");
  await writeFile(other, await readFile(path), { mode: 0o755 });
  const before = (await cluster.ledger())?.processes.map((p) => p.pid) ?? [];
  await cluster.define({ binary: other });

  await until(
    async () => (await cluster.ledger())?.processes.some((p) => p.node === "n2" && p.pid > 0 && !before.includes(p.pid)) === true,
    60_000,
    "n2's new stage started",
    25,
  );
  const launchedAt = Date.now();
  await n2.cutData();
  try {
    // Said while the launch still waits, not only at its deadline.
    const silent = await cluster.waitFor((s) => s.timeline.some((e) => e.step === "stage-1-silent"), 40_000);
    expect(silent.timeline.some((e) => e.step === "launch-failed")).toBe(false);
    expect(conditionOf(silent, "Ready")?.message).toMatch(/stage-1 runs, but its transport address \S+ does not answer from \S+ \(no answer, not a refusal, 2 probes/);
    const failed = await cluster.waitFor((s) => s.timeline.some((e) => e.step === "launch-failed"), 40_000);
    await rm(delayFlag);
    const detail = failed.timeline.find((e) => e.step === "launch-failed")!.detail ?? "";
    expect(detail).toMatch(
      /^StageLinkUnreachable at stage-1-listen: stage-1 on n2 runs, but its transport address \S+ was still silent from \S+ at the deadline \(8000 ms; no answer, not a refusal\): the path from \S+ to n2 is down or blocked/,
    );
    console.log(`data path cut: failed ${Date.now() - launchedAt} ms after the cut: ${detail}`);
    // Given back: a second failed launch while the path stays cut leaves the count where it was.
    const second = await cluster.waitFor((s) => s.restarts?.evidence.filter((e) => e.reason === "StageLinkUnreachable").length === 2, 60_000);
    expect(second.restarts?.count).toBe(0);
    expect(conditionOf(second, "Ready")?.status).not.toBe("True");
    expect(second.health).not.toBe("Stalled");
  } finally {
    await n2.heal();
  }
  const ready = await cluster.waitForReady(90_000);
  expect(ready.restarts?.count).toBe(1);
  expect(cluster.world.audit.problems).toEqual([]);
}, 240_000);
