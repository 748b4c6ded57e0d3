/**
 * The watch that asks for a pass the moment a node that did not answer is back (a pass that failed
 * as NodeUnreachable would otherwise wait out its back-off, up to a minute), on real sshd nodes: a
 * node whose sshd is down is asked every round, and once it answers after missing two rounds the
 * pass is asked for, once; nodes that answer all along ask nothing; a watch stopped (the pass did
 * not fail so again, or the daemon stops) asks nothing. The node of a leftover a teardown could not
 * reach counts as silent from the start.
 */
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { NodePool } from "../../src/nodes/index.js";
import { ReturningNodes, whatToWatch, type NodeWatch } from "../../src/reconciler/returning-nodes/index.js";
import type { LedgerEntry } from "../../src/launch/index.js";
import type { NodeAccess } from "../../src/nodes/index.js";
import { sshNodeConfig, startSshdNodes, type SshdSet } from "../support/sshd.js";

let sshd: SshdSet;
let pool: NodePool;

beforeAll(async () => {
  sshd = await startSshdNodes({ count: 2 });
  pool = new NodePool({ knownHostsPath: sshd.knownHostsPath, sshConfigPath: join(sshd.root, "no-config") });
}, 60_000);

afterAll(async () => {
  await pool?.close();
  await sshd?.close();
});

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** What a pass that failed as NodeUnreachable leaves to watch: every node its definition uses. */
function afterUnreachable(nodes: NodeAccess[]): NodeWatch | undefined {
  return whatToWatch({ entry: undefined, failedUnreachable: true, nodesUsed: nodes, nodeFor: (n) => nodes.find((x) => x.config.name === n)!, nodeSettings: () => null });
}

it("a node back after missing rounds asks for one pass at once; nodes answering all along ask for none", async () => {
  const asked: Array<{ name: string; at: number }> = [];
  const watches = new ReturningNodes({ requeue: (name) => asked.push({ name, at: Date.now() }), pollMs: 250 });
  const nodes = [pool.get(sshNodeConfig(sshd, 0)), pool.get(sshNodeConfig(sshd, 1))];
  let stopped = false;
  try {
    await sshd.nodes[1]!.stop();
    stopped = true;
    watches.follow("c1", afterUnreachable(nodes));
    // Both answering nodes' rounds and the silent one's, for a while: nothing asked.
    await sleep(2_000);
    expect(asked).toEqual([]);
    await sshd.nodes[1]!.start();
    stopped = false;
    const back = Date.now();
    while (asked.length === 0 && Date.now() - back < 10_000) await sleep(50);
    expect(asked.map((a) => a.name)).toEqual(["c1"]);
    expect(asked[0]!.at - back).toBeLessThan(5_000);
    // Once: the watch ended with its question.
    await sleep(1_000);
    expect(asked).toHaveLength(1);

    // Every node answering from the start: nothing to wait for, nothing asked.
    watches.follow("c2", afterUnreachable(nodes));
    await sleep(1_500);
    expect(asked).toHaveLength(1);
  } finally {
    watches.stopAll();
    // Started again only if it is still stopped: a second server would outlive the set's close.
    if (stopped) await sshd.nodes[1]!.start();
  }
});

it("a watch stopped before the node returns asks nothing", async () => {
  const asked: string[] = [];
  const watches = new ReturningNodes({ requeue: (name) => asked.push(name), pollMs: 250 });
  try {
    await sshd.nodes[0]!.stop();
    watches.follow("c3", afterUnreachable([pool.get(sshNodeConfig(sshd, 0))]));
    await sleep(1_000);
    // The next pass did not fail on a silent node: the watch ends.
    watches.follow(
      "c3",
      whatToWatch({
        entry: undefined,
        failedUnreachable: false,
        nodesUsed: [pool.get(sshNodeConfig(sshd, 0))],
        nodeFor: () => pool.get(sshNodeConfig(sshd, 0)),
        nodeSettings: () => null,
      }),
    );
    await sshd.nodes[0]!.start();
    await sleep(1_500);
    expect(asked).toEqual([]);
  } finally {
    watches.stopAll();
  }
});

/** A ledger entry whose teardown left one process on `node` it could not reach. */
function leftoverOn(node: string): LedgerEntry {
  const process = { role: "coordinator" as const, node, pid: 4242, startTime: "1", runDir: "/r", logFile: "/r/log", exitFile: "/r/exit", unreachable: true };
  return { cluster: "c4", revision: "r", phase: "tearing-down", startedAt: new Date().toISOString(), processes: [process], ports: [] };
}

it("a leftover's node, silent at the teardown, asks for a pass at its first answer; asked again after that pass, it must be seen silent first", async () => {
  const asked: number[] = [];
  const watches = new ReturningNodes({ requeue: () => asked.push(Date.now()), pollMs: 250 });
  const node = pool.get(sshNodeConfig(sshd, 1));
  const leftBehind = (): NodeWatch | undefined =>
    whatToWatch({ entry: leftoverOn(node.config.name), failedUnreachable: false, nodesUsed: [], nodeFor: () => node, nodeSettings: () => null });
  let stopped = false;
  try {
    // The node answers already (it came back before the watch began): its first answer counts.
    const began = Date.now();
    watches.follow("c4", leftBehind());
    while (asked.length === 0 && Date.now() - began < 5_000) await sleep(50);
    expect(asked).toHaveLength(1);
    // Within a few rounds, however loaded the machine: the back-off it saves is up to a minute.
    expect(asked[0]! - began).toBeLessThan(5_000);
    // The pass that followed still could not stop it (the same leftover): the node answering all
    // along asks for nothing more, so a node that answers but fails the teardown costs one pass.
    watches.follow("c4", leftBehind());
    await sleep(1_500);
    expect(asked).toHaveLength(1);
    // Once it is seen silent and answers again, it asks again (its connection ends with the server:
    // one already made would otherwise go on answering).
    await sshd.nodes[1]!.stop({ connections: true });
    stopped = true;
    await sleep(1_000);
    await sshd.nodes[1]!.start();
    stopped = false;
    const back = Date.now();
    while (asked.length === 1 && Date.now() - back < 10_000) await sleep(50);
    expect(asked).toHaveLength(2);
    // No leftover left and the pass did not fail: nothing to watch.
    expect(whatToWatch({ entry: undefined, failedUnreachable: false, nodesUsed: [node], nodeFor: () => node, nodeSettings: () => null })).toBeUndefined();
  } finally {
    watches.stopAll();
    if (stopped) await sshd.nodes[1]!.start();
  }
});
