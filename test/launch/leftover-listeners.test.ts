/**
 * What a launch left listening out of the teardown's reach (an engine that detached itself with a
 * clean environment: its command line still names the launch's cluster config) is stopped by the
 * teardown and, should one survive, by the next launch before it chooses ports; each said in the
 * timeline. A listener that only runs from a run directory (a file server over the logs) is left
 * alone, and the coordinator's HTTP port held by anything else is PortInUse naming the holder's pid
 * and command line. Real processes on loopback sshd nodes. Needs `npm run build`.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { launchCluster, teardownCluster, type TimelineEvent } from "../../src/launch/index.js";
import { freePort, launchFailure, makeContext, makeRequest, startLifecycleWorld, tearDownLeft, type LifecycleWorld } from "./lifecycle-fixture.js";

let world: LifecycleWorld;
const holders: ChildProcess[] = [];

beforeAll(async () => {
  world = await startLifecycleWorld();
}, 120_000);
afterAll(async () => {
  for (const holder of holders) holder.kill("SIGKILL");
  await world?.close();
});

/** A process listening on host:port from `cwd`, its command line ending with `named` (a file it was handed). */
async function listen(host: string, port: number, cwd: string, named?: string): Promise<ChildProcess> {
  const script = `require("node:http").createServer(() => {}).listen(${port}, ${JSON.stringify(host)}, () => console.log("up"))`;
  const holder = spawn(process.execPath, ["-e", script, ...(named === undefined ? [] : [named])], { cwd, stdio: ["ignore", "pipe", "ignore"] });
  holders.push(holder);
  await new Promise<void>((resolve, reject) => {
    holder.stdout!.once("data", () => resolve());
    holder.once("exit", () => reject(new Error("the listener exited")));
  });
  return holder;
}

const exitOf = (holder: ChildProcess): Promise<unknown> =>
  new Promise((resolve) => (holder.exitCode !== null || holder.signalCode !== null ? resolve(undefined) : holder.once("exit", resolve)));
const running = (holder: ChildProcess): boolean => holder.exitCode === null && holder.signalCode === null;
const stoppedWords = (holder: ChildProcess, node: string) =>
  expect.stringMatching(
    new RegExp(
      `^pid ${holder.pid} on ${node} \\(.*node.*\\), started by an earlier launch of the cluster \\(its command names the launch's files\\), still listened: stopped$`,
    ),
  );
const said = (events: TimelineEvent[]) => events.filter((e) => e.step === "leftover-stopped").map((e) => e.detail);

it("a launch stops listeners an earlier one left (their command names its cluster config), not a file server in its run directory, and serves", async () => {
  const request = await makeRequest(world, { cluster: "left-behind", register: false });
  const coordinator = await listen(request.coordinator.bindHost, request.coordinator.httpPort, "/", join(request.coordinator.runDir, "cluster.toml"));
  const stage = await listen(request.stages[1]!.bindHost, await freePort(request.stages[1]!.bindHost), "/", join(request.stages[1]!.runDir, "cluster.toml"));
  const fileServer = await listen(request.stages[0]!.bindHost, await freePort(request.stages[0]!.bindHost), request.stages[0]!.runDir);
  const context = makeContext(world);
  try {
    await launchCluster(request, context);
    expect(said(context.events)).toHaveLength(2);
    expect(said(context.events)).toContainEqual(stoppedWords(coordinator, "node-1"));
    expect(said(context.events)).toContainEqual(stoppedWords(stage, "node-2"));
    expect(context.events.map((e) => e.step)).toContain("ready");
    await Promise.all([exitOf(coordinator), exitOf(stage)]);
    expect(running(fileServer)).toBe(true);

    // A teardown stops what the launch left out of its reach, as it stops the processes it recorded.
    const entry = (await world.ledger.read("left-behind"))!;
    const orphan = await listen(request.stages[0]!.bindHost, await freePort(request.stages[0]!.bindHost), "/", join(request.stages[0]!.runDir, "cluster.toml"));
    const events: TimelineEvent[] = [];
    await teardownCluster(entry, { ledger: world.ledger, registrar: world.registrar, nodeFor: world.nodeFor, graceMs: 2_000, onEvent: (e) => events.push(e) });
    expect(said(events)).toEqual([stoppedWords(orphan, "node-1")]);
    await exitOf(orphan);
    expect(running(fileServer)).toBe(true);
  } finally {
    await tearDownLeft(world, "left-behind");
  }
}, 90_000);

it("a holder from anywhere else is named in PortInUse and left running", async () => {
  const request = await makeRequest(world, { cluster: "someone-else", register: false });
  const holder = await listen(request.coordinator.bindHost, request.coordinator.httpPort, world.root);
  const error = await launchFailure(world, request);
  expect(error.reason).toBe("PortInUse");
  expect(error.message).toMatch(
    new RegExp(
      `is already in use on node-1 by pid ${holder.pid} \\(\\S*node -e require\\("node:http"\\).*\\); choose another \\[coordinator\\] port or stop what holds it$`,
    ),
  );
  expect(running(holder)).toBe(true);
}, 90_000);
