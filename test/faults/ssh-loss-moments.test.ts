/**
 * The SSH control channel to a stage host lost while the pipeline's own links stay up, at moments
 * the other lab tests do not cover: while the model is pushed to the host, while the cluster is
 * relaunched after a death, and while the cluster is torn down because its definition was deleted.
 * On the lab of network namespaces (test/faults/support/netns.ts): the daemon, the embedded router
 * and the coordinator in the root namespace, stage-0 on n1, stage-1 on n2, production health
 * timings. The channel is lost either by dropping n2's port 22 alone (iptables, both ways: silent)
 * or by stopping n2's sshd (its connections reset, new ones refused).
 *
 * Each case logs what the status file said while the fault lasted, then checks that it was true,
 * that the cluster converges after the heal, and that nothing is left running or lost.
 */
import { rm, stat } from "node:fs/promises";
import { join } from "node:path";
import { expect, it } from "vitest";
import type { ClusterStatus } from "../../src/reconciler/index.js";
import { chat, conditionOf, enginePidOf, readStatusFile, sleep } from "../reconciler/daemon-fixture.js";
import { enginesPerPlace } from "./support/death-words.js";
import { useLabCluster } from "./support/lab-cluster.js";
import type { LabHost } from "./support/netns.js";
import { shapeLink } from "./support/link-shaping.js";
import { enginePids, filesUnder, isRunning, ledgerNames, recordStatusWrites, routerBackends, until, type StatusWrite } from "./support/world-checks.js";

const name = "sshloss";
// Eight layers: a 680 KB weights file, 14 s over n2's shaped link. Every death spends a launch.
const cluster = useLabCluster(name, { hosts: 2, layers: 8, restartBudget: 6, cutOff: 1 });

/** One line of what a status write said: health, Ready, Reconciling, the last error. */
function said(write: StatusWrite, since: number): string {
  const s = write.status;
  const ready = conditionOf(s, "Ready");
  const reconciling = conditionOf(s, "Reconciling");
  return [
    `+${write.at - since} ms ${s.health}`,
    `Ready=${ready?.status}/${ready?.reason}: ${ready?.message ?? ""}`,
    `Reconciling=${reconciling?.status}/${reconciling?.reason}`,
    ...(s.lastError === undefined ? [] : [`lastError ${s.lastError.reason}: ${s.lastError.message}`]),
  ].join(" | ");
}

/** Record the status file's writes from now until `stop`. */
function watchStatus(): { writes: StatusWrite[]; stop(): Promise<void> } {
  let watching = true;
  const recording = recordStatusWrites(cluster.world, name, () => watching, { pollMs: 20 });
  return {
    writes: recording.writes,
    stop: async () => {
      watching = false;
      await recording.done;
    },
  };
}

const cardOf = (s: ClusterStatus, node: string): ClusterStatus["staging"][number] | undefined => s.staging.find((c) => c.node === node);

/**
 * Hold while n2's control channel is lost: `check` the status file every `pollMs` until it has
 * recorded two failed passes (two new `lastError.at`, besides `seen`) since the hold began, so that
 * the checks cover two passes that met the loss, but for no longer than `boundMs` after `from` (the
 * fixed hold this replaced: on a machine whose passes are slower, the checks still cover as much
 * as they did). Returns how many failed passes it saw.
 */
async function holdThroughTwoFailedPasses(
  read: () => Promise<ClusterStatus | undefined>,
  check: (status: ClusterStatus | undefined) => Promise<void>,
  hold: { from: number; boundMs: number; pollMs: number; seen?: string },
): Promise<number> {
  const seen = new Set(hold.seen === undefined ? [] : [hold.seen]);
  let failed = 0;
  while (failed < 2 && Date.now() - hold.from < hold.boundMs) {
    const s = await read();
    await check(s);
    const at = s?.lastError?.at;
    if (at !== undefined && !seen.has(at)) {
      seen.add(at);
      failed++;
    }
    if (failed < 2) await sleep(hold.pollMs);
  }
  return failed;
}

it("n2's port 22 dropped in the middle of its push: staging fails naming n2, nothing launched; after the heal the push resumes and the cluster serves", async () => {
  const n2 = cluster.lab.hosts[1]!;
  const n2ModelDir = cluster.lab.sshd.nodes[1]!.modelDir;
  const unshape = await shapeLink(n2, { rateKbit: 400, burstBytes: 4_000, latencyMs: 2_000 });
  await cluster.define({ modelSource: "push" });
  // The weights' push under way on n2: its partial file there, far from whole. A partial file of
  // more than 16 KiB is the weights' (every other file of the model is smaller: the tokenizer's is
  // 13.6 KB): one of a small file may be verified and renamed before the cut lands, leaving no
  // partial file to keep.
  const weightsPartial = async (): Promise<boolean> => {
    for (const f of (await filesUnder(n2ModelDir)).filter((name) => name.endsWith(".incomplete"))) {
      if (((await stat(join(n2ModelDir, f)).catch(() => undefined))?.size ?? 0) > 16_384) return true;
    }
    return false;
  };
  await until(
    async () => (await weightsPartial()) && (cardOf(await cluster.status(), "n2")?.bytesDone ?? 0) > 0,
    60_000,
    "a partial file on n2, and the status saying its push is under way",
    50,
  );
  const pushing = await cluster.status();
  expect(cardOf(pushing, "n2")?.state).toBe("staging");
  expect(cardOf(pushing, "n2")!.bytesDone).toBeLessThan(cardOf(pushing, "n2")!.bytesTotal / 2);
  const cutAt = Date.now();
  const watch = watchStatus();
  let failedAt: number | undefined;
  try {
    await n2.cutSsh();
    // Held through the cut push's failure and the next pass's (about 8 s), 12 s at most.
    const passes = await holdThroughTwoFailedPasses(
      () => cluster.status(),
      async (s) => {
        expect(conditionOf(s!, "Ready")?.status, "Ready while n2's control channel is cut during staging").not.toBe("True");
        if (failedAt === undefined && conditionOf(s!, "Staged")?.status === "False") {
          failedAt = Date.now();
          expect(conditionOf(s!, "Staged")).toMatchObject({ reason: "NodeUnreachable" });
          expect(cardOf(s!, "n2")).toMatchObject({ state: "failed", reason: "NodeUnreachable" });
        }
        expect(await enginePids(cluster.world), "nothing launched while n2 cannot be staged").toEqual([]);
      },
      { from: cutAt, boundMs: 12_000, pollMs: 200, seen: pushing.lastError?.at },
    );
    console.log(`staging, port 22 cut: held ${Date.now() - cutAt} ms, through ${passes} failed passes`);
    expect(failedAt, "staging failed while n2's control channel was cut").toBeDefined();
    expect(failedAt! - cutAt).toBeLessThan(8_000);
    const partials = (await filesUnder(n2ModelDir)).filter((f) => f.endsWith(".incomplete"));
    console.log(`staging, port 22 cut: partial files on n2 at the heal: ${JSON.stringify(partials)}`);
    expect(partials.length, "the partial push kept on n2 for the resume").toBe(1);
  } finally {
    await n2.heal();
    await unshape();
    await watch.stop();
  }
  console.log(`staging, port 22 cut: status as written:\n  ${watch.writes.map((w) => said(w, cutAt)).join("\n  ")}`);

  const ready = await cluster.waitForReady(60_000);
  expect(cardOf(ready, "n2")?.state).toBe("present");
  expect((await filesUnder(n2ModelDir)).filter((f) => /\.(incomplete|tmp)$/.test(f))).toEqual([]);
  expect(await chat(ready.coordinator!.url, cluster.world.modelDir)).toBeTypeOf("string");
  expect(cluster.world.audit.problems).toEqual([]);
}, 150_000);

it("stage-0 killed while n2's port 22 is dropped: Ready=False at once, no relaunch while n2's stage cannot be stopped, the status says what waits; after the heal one engine set", async () => {
  const [n1, n2] = [cluster.lab.hosts[0]!, cluster.lab.hosts[1]!];
  await cluster.waitForReady(60_000);
  const entry = (await cluster.ledger())!;
  const stage0 = entry.processes.find((p) => p.role === "stage" && p.index === 0)!;
  const stage1 = entry.processes.find((p) => p.role === "stage" && p.index === 1)!;
  expect(stage0.node).toBe(n1.name);
  const oldPids = await enginePids(cluster.world);
  const launchesBefore = (await cluster.status()).restarts?.count ?? 0;
  const cutAt = Date.now();
  let killedAt = Number.POSITIVE_INFINITY;
  const watch = watchStatus();
  try {
    await n2.cutSsh();
    // Only the control channel: Degraded, still Ready and serving.
    const degraded = await cluster.waitFor((s) => s.health === "Degraded", 15_000);
    expect(conditionOf(degraded, "Ready")?.status).toBe("True");
    expect(await chat(degraded.coordinator!.url, cluster.world.modelDir)).toBeTypeOf("string");
    // A death on the reachable host: the relaunch must first stop stage-1 on n2, which it cannot ask.
    killedAt = Date.now();
    process.kill(await enginePidOf(stage0.pid), "SIGKILL");
    const notReadyAt = await until(async () => conditionOf(await cluster.status(), "Ready")?.status === "False", 10_000, "Ready=False after the death", 20);
    expect(notReadyAt - killedAt).toBeLessThan(5_000);
    await until(async () => !(await routerBackends(cluster.world)).includes("url:"), 10_000, "the router's backend removed");
    // The reachable part stopped; stage-1 stays in the ledger as the one leftover, marked unreachable.
    await until(async () => (await cluster.ledger())?.processes.every((p) => p.node === "n2") === true, 20_000, "only n2's stage left in the ledger");
    const ledger = (await cluster.ledger())!;
    expect(ledger.phase).toBe("tearing-down");
    expect(ledger.processes.map((p) => [p.pid, p.unreachable])).toEqual([[stage1.pid, true]]);
    // Held through two passes that could not stop stage-1 (about 9 s), 10 s at most: nothing
    // launched anywhere meanwhile, Ready never True.
    const heldFrom = Date.now();
    const passes = await holdThroughTwoFailedPasses(
      () => cluster.status(),
      async (s) => {
        expect(conditionOf(s!, "Ready")?.status).not.toBe("True");
        expect(
          (await enginePids(cluster.world)).filter((pid) => !oldPids.includes(pid)),
          "nothing new launched while n2 is cut",
        ).toEqual([]);
      },
      { from: heldFrom, boundMs: 10_000, pollMs: 250, seen: (await cluster.status()).lastError?.at },
    );
    console.log(`relaunch, port 22 cut: held ${Date.now() - heldFrom} ms, through ${passes} failed passes`);
    const pending = await cluster.status();
    console.log(`relaunch, port 22 cut: stage-1 (pid ${stage1.pid}) running on n2 at the heal: ${isRunning(stage1.pid)}`);
    expect(JSON.stringify(pending), "the status names what waits on n2").toMatch(/stage-1 \(pid \d+ on n2\)|stage-1 on n2/);
  } finally {
    await n2.heal();
    await watch.stop();
  }
  const healedAt = Date.now();
  console.log(`relaunch, port 22 cut: status as written:\n  ${watch.writes.map((w) => said(w, cutAt)).join("\n  ")}`);
  expect(
    watch.writes.filter((w) => w.at > killedAt && conditionOf(w.status, "Ready")?.status === "True").map((w) => said(w, cutAt)),
    "Ready=True written after the death while n2 was cut",
  ).toEqual([]);
  const ready = await cluster.waitForReady(60_000);
  console.log(`relaunch, port 22 cut: Ready ${Date.now() - healedAt} ms after the heal`);
  // The passes that could not stop stage-1 launched nothing: one launch for the one death.
  expect(ready.restarts?.count, "launches counted at this revision").toBe(launchesBefore + 1);
  expect(isRunning(stage1.pid), "the old stage-1 stopped").toBe(false);
  expect(
    (await enginePids(cluster.world)).filter((pid) => oldPids.includes(pid)),
    "none of the old processes left",
  ).toEqual([]);
  expect(await enginesPerPlace(cluster.world, cluster.lab), "one engine set after the heal (n1, n2, the root namespace)").toEqual([1, 1, 1]);
  expect(await chat(ready.coordinator!.url, cluster.world.modelDir)).toBeTypeOf("string");
  expect(cluster.world.audit.problems).toEqual([]);
}, 120_000);

/** How n2's control channel is lost, how it comes back, and how the status says why n2 cannot be asked. */
const controlLosses = [
  {
    what: "n2's sshd stopped",
    lose: (n2: LabHost) => n2.killSshd(),
    restore: (n2: LabHost) => n2.startSshd(),
    why: /stage-1 on n2: .*ECONNREFUSED/,
  },
  {
    what: "n2's port 22 dropped",
    lose: (n2: LabHost) => n2.cutSsh(),
    restore: (n2: LabHost) => n2.heal(),
    why: /stage-1 on n2: .*(Timed out while waiting for handshake|still connecting|connection closed)/,
  },
] as const;

for (const loss of controlLosses) {
  it(`the definition deleted with ${loss.what}: the reachable part torn down, the status file stays and says what waits on n2 and why; once n2 answers nothing is left`, async () => {
    const n2 = cluster.lab.hosts[1]!;
    // Defined again after the case before pruned it (the same definition, the same revision).
    if ((await readStatusFile(cluster.world, name)) === undefined) await cluster.define({ modelSource: "push" });
    await cluster.waitForReady(60_000);
    const entry = (await cluster.ledger())!;
    const stage1 = entry.processes.find((p) => p.role === "stage" && p.index === 1)!;
    const cutAt = Date.now();
    const watch = watchStatus();
    try {
      await loss.lose(n2);
      await cluster.waitFor((s) => s.health === "Degraded", 15_000);
      await rm(join(cluster.world.clustersDir, `${name}.toml`));
      await until(async () => !(await routerBackends(cluster.world)).includes("url:"), 10_000, "the router's backend removed");
      await until(async () => (await cluster.ledger())?.processes.every((p) => p.node === "n2") === true, 20_000, "only n2's stage left in the ledger");
      // Held through two passes that could not stop stage-1 (4 to 8 s), 8 s at most: the status
      // file stays while the teardown waits on n2, and says so.
      const heldFrom = Date.now();
      const passes = await holdThroughTwoFailedPasses(
        () => readStatusFile(cluster.world, name),
        async (s) => {
          expect(s, "the status file of a teardown still waiting on n2").toBeDefined();
          expect(conditionOf(s!, "Ready")?.status).not.toBe("True");
        },
        { from: heldFrom, boundMs: 8_000, pollMs: 250, seen: (await readStatusFile(cluster.world, name))?.lastError?.at },
      );
      console.log(`prune, ${loss.what}: held ${Date.now() - heldFrom} ms, through ${passes} failed passes`);
      const pending = (await readStatusFile(cluster.world, name))!;
      console.log(`prune, ${loss.what}: stage-1 (pid ${stage1.pid}) running on n2 when n2 answers again: ${isRunning(stage1.pid)}`);
      expect(JSON.stringify(pending), "the status names what waits on n2").toMatch(/stage-1 \(pid \d+ on n2\)|stage-1 on n2/);
      // …and why n2 cannot be asked: its sshd refuses connections, or it is silent.
      expect(pending.lastError?.message, "the status says why n2 cannot be asked").toMatch(loss.why);
    } finally {
      await loss.restore(n2);
      await watch.stop();
    }
    const backAt = Date.now();
    console.log(`prune, ${loss.what}: status as written:\n  ${watch.writes.map((w) => said(w, cutAt)).join("\n  ")}`);
    const prunedAt = await until(async () => (await readStatusFile(cluster.world, name)) === undefined, 30_000, "the status file removed once the teardown ended");
    console.log(`prune, ${loss.what}: the status file removed ${prunedAt - backAt} ms after n2 answered again`);
    // The leftover's node is watched: the pass comes as soon as n2 answers, not after the back-off.
    expect(prunedAt - backAt).toBeLessThan(8_000);
    expect(await ledgerNames(cluster.world)).toEqual([]);
    expect(await enginePids(cluster.world)).toEqual([]);
    expect(isRunning(stage1.pid)).toBe(false);
    expect(cluster.world.audit.problems).toEqual([]);
  }, 120_000);
}
