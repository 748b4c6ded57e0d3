/**
 * The watch that asks for a pass the moment a node that did not answer is back (a pass that failed
 * as NodeUnreachable would otherwise wait out its back-off, up to a minute), on real sshd nodes: a
 * node whose sshd is down is asked every round, and once it answers after missing two rounds the
 * pass is asked for, once; nodes that answer all along ask nothing; a watch stopped (the pass did
 * not fail so again, or the daemon stops) asks nothing.
 */
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { NodePool } from "../../src/nodes/index.js";
import { ReturningNodes } from "../../src/reconciler/returning-nodes.js";
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

it("a node back after missing rounds asks for one pass at once; nodes answering all along ask for none", async () => {
  const asked: Array<{ name: string; at: number }> = [];
  const watches = new ReturningNodes({ requeue: (name) => asked.push({ name, at: Date.now() }), pollMs: 250 });
  const nodes = [pool.get(sshNodeConfig(sshd, 0)), pool.get(sshNodeConfig(sshd, 1))];
  let stopped = false;
  try {
    await sshd.nodes[1]!.stop();
    stopped = true;
    watches.follow("c1", true, nodes);
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
    watches.follow("c2", true, nodes);
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
    watches.follow("c3", true, [pool.get(sshNodeConfig(sshd, 0))]);
    await sleep(1_000);
    // The next pass did not fail on a silent node: the watch ends.
    watches.follow("c3", false, [pool.get(sshNodeConfig(sshd, 0))]);
    await sshd.nodes[0]!.start();
    await sleep(1_500);
    expect(asked).toEqual([]);
  } finally {
    watches.stopAll();
  }
});
