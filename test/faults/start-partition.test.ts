/**
 * A stage host partitioned while its stage is being started, on a lab of network namespaces
 * (test/faults/support/netns.ts): the daemon and the coordinator in the root namespace, stage hosts
 * n1 and n2 each in its own namespace with its own sshd (iptables DROP both ways: no FIN, no RST).
 * The cut comes the moment the launch records a given step in the ledger (a watch on the ledger
 * directory; the daemon runs in the test's process): n2's processes are stopped in that very turn
 * of the event loop, so that n2 answers nothing more while the cut is put in place, and then go on,
 * cut off. A cut made by starting `iptables` alone came a few SSH round trips late under load.
 *
 * The launch must say what happened — the node did not answer while stage-1 was started
 * (`NodeUnreachable` at `stage-1-start`) — not that the launch files could not be written, nor
 * that the stage exited as soon as it started; that launch says nothing of the cluster and is given
 * back to the restart budget. After the heal whatever was started on n2 is found and stopped, and
 * the cluster serves with one engine set.
 */
import { execFile } from "node:child_process";
import { readFileSync, watch } from "node:fs";
import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { expect, it } from "vitest";
import type { LedgerEntry } from "../../src/launch/index.js";
import type { ClusterStatus } from "../../src/reconciler/index.js";
import { chat } from "../reconciler/daemon-fixture.js";
import { continueProcesses, stopNamespaceNow } from "../support/namespaces.js";
import { enginesPerPlace } from "./support/death-words.js";
import { useLabCluster } from "./support/lab-cluster.js";

const run = promisify(execFile);
const name = "startcut";
const cluster = useLabCluster(name, { hosts: 2, layers: 4, restartBudget: 3, cutOff: 1 });

/**
 * Cut n2 off (DROP both ways) the first time the cluster's ledger entry, as the launch rewrites it,
 * satisfies `when`; resolves with the failed pass's status, n2 healed.
 */
async function cutDuringLaunch(start: () => Promise<void>, when: (entry: LedgerEntry) => boolean): Promise<ClusterStatus> {
  const n2 = cluster.lab.hosts[1]!;
  const ledgerDir = join(cluster.world.stateDir, "ledger");
  await mkdir(ledgerDir, { recursive: true });
  let cut: Promise<void> | undefined;
  const watcher = watch(ledgerDir, () => {
    if (cut !== undefined) return;
    let entry: LedgerEntry;
    try {
      entry = JSON.parse(readFileSync(join(ledgerDir, `${name}.json`), "utf8")) as LedgerEntry;
    } catch {
      return; // Not written yet.
    }
    if (!when(entry)) return;
    // Silent now; cut off (DROP both ways, no FIN, no RST) before it goes on.
    const stopped = stopNamespaceNow(n2.netns);
    const iptables = (chain: string) => run("ip", ["netns", "exec", n2.netns, "iptables", "-w", "-I", chain, "-j", "DROP"]);
    cut = iptables("OUTPUT")
      .then(() => iptables("INPUT"))
      .then(
        () => continueProcesses(stopped),
        (error: unknown) => {
          continueProcesses(stopped);
          throw error;
        },
      );
  });
  try {
    await start();
    // The failed pass's status: the launch's timeline, its evidence and the error.
    const failed = await cluster.waitFor((s) => s.timeline.some((e) => e.step === "launch-failed") && s.lastError !== undefined, 40_000);
    expect(cut, "n2 was cut off during the launch").toBeDefined();
    return failed;
  } finally {
    watcher.close();
    await cut?.catch(() => undefined);
    await n2.heal();
  }
}

/** The launch failure the timeline tells, checked to be n2's silence at `step`, and given back to the budget; then back whole after the heal. */
async function expectGivenBackThenWhole(failed: ClusterStatus, step: string, words: RegExp): Promise<void> {
  const detail = failed.timeline.find((e) => e.step === "launch-failed")!.detail ?? "";
  console.log(`cut during the launch: ${detail}`);
  expect(detail.startsWith(`NodeUnreachable at ${step}: `), detail).toBe(true);
  expect(detail.slice(`NodeUnreachable at ${step}: `.length)).toMatch(words);
  expect(failed.restarts?.evidence.at(-1)?.reason).toBe("NodeUnreachable");
  expect(failed.lastError?.reason).toBe("NodeUnreachable");
  expect(failed.restarts?.count, "the launch cut off was given back to the budget").toBe(0);

  const ready = await cluster.waitForReady(60_000);
  // Only the launch that serves counts.
  expect(ready.restarts?.count, "launches counted at this revision").toBe(1);
  expect(await enginesPerPlace(cluster.world, cluster.lab), "one engine set after the heal (n1, n2, the root namespace)").toEqual([1, 1, 1]);
  expect(await chat(ready.coordinator!.url, cluster.world.modelDir)).toBeTypeOf("string");
  expect(cluster.world.audit.problems).toEqual([]);
}

it("a stage host cut off as its stage is started: the launch fails naming the silent node at stage-1-start, given back to the budget; after the heal one engine set", async () => {
  // Cut the moment the ledger records stage-0: n2's stage is started next.
  const failed = await cutDuringLaunch(
    async () => {
      await cluster.define();
    },
    (entry) => entry.processes.some((p) => p.node === "n1") && !entry.processes.some((p) => p.node === "n2"),
  );
  await expectGivenBackThenWhole(failed, "stage-1-start", /^stage-1 on n2 could not be started: node n2: .*; whether it runs is unknown/);
}, 120_000);

it("a stage host cut off as the launch files are written: the launch fails naming the silent node at launch-files, given back to the budget; after the heal one engine set", async () => {
  const serving = (await cluster.ledger())!.startedAt;
  // A new revision (a longer context) replaces the cluster: cut the moment the new launch records its ports.
  const failed = await cutDuringLaunch(
    async () => {
      await cluster.define({ contextLength: 320 });
    },
    (entry) => entry.startedAt !== serving && entry.phase === "launching" && entry.processes.length === 0 && entry.ports.length > 0,
  );
  await expectGivenBackThenWhole(failed, "launch-files", /^could not write the launch files: node n2: /);
}, 120_000);
