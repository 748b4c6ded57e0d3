/**
 * Listeners an earlier launch of the cluster left (started from its run directories: what an engine
 * that detached itself with a clean environment leaves, out of reach of the teardown's process group
 * and mark) are stopped when the next launch starts, and said in the timeline; the launch goes on.
 * The coordinator's HTTP port held by anything else: PortInUse names the holder's pid and command
 * line, and leaves it running. Real processes on loopback sshd nodes. Needs `npm run build`.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { afterAll, beforeAll, expect, it } from "vitest";
import { LaunchError, launchCluster, teardownCluster } from "../../src/launch/index.js";
import { freePort, makeContext, makeRequest, startLifecycleWorld, type LifecycleWorld } from "./lifecycle-fixture.js";

let world: LifecycleWorld;
const holders: ChildProcess[] = [];

beforeAll(async () => {
  world = await startLifecycleWorld();
}, 120_000);
afterAll(async () => {
  for (const holder of holders) holder.kill("SIGKILL");
  await world?.close();
});

/** A process listening on host:port with `cwd` as its folder, as a detached engine would. */
async function holdPort(host: string, port: number, cwd: string): Promise<ChildProcess> {
  const holder = spawn(process.execPath, ["-e", `require("node:http").createServer(() => {}).listen(${port}, ${JSON.stringify(host)}, () => console.log("up"))`], {
    cwd,
    stdio: ["ignore", "pipe", "ignore"],
  });
  holders.push(holder);
  await new Promise<void>((resolve, reject) => {
    holder.stdout!.once("data", () => resolve());
    holder.once("exit", () => reject(new Error("the holder exited")));
  });
  return holder;
}

const exitOf = (holder: ChildProcess): Promise<unknown> =>
  new Promise((resolve) => (holder.exitCode !== null || holder.signalCode !== null ? resolve(undefined) : holder.once("exit", resolve)));

it("listeners started from the cluster's run directories are its leftovers: stopped, and the launch serves", async () => {
  const request = await makeRequest(world, { cluster: "left-behind", register: false });
  // One on the coordinator's HTTP port, one on another port of stage-1's node, each from its run directory.
  const coordinator = await holdPort(request.coordinator.bindHost, request.coordinator.httpPort, request.coordinator.runDir);
  const stage = await holdPort(request.stages[1]!.bindHost, await freePort(request.stages[1]!.bindHost), request.stages[1]!.runDir);
  const context = makeContext(world);
  try {
    await launchCluster(request, context);
    const said = context.events.filter((e) => e.step === "leftover-stopped").map((e) => e.detail);
    expect(said).toHaveLength(2);
    const stopped = (holder: ChildProcess, node: string, dir: string) =>
      expect.stringMatching(new RegExp(`^pid ${holder.pid} on ${node} \\(.*node.*\\), started from ${dir} by an earlier launch, still listened: stopped$`));
    expect(said).toContainEqual(stopped(coordinator, "node-1", request.coordinator.runDir));
    expect(said).toContainEqual(stopped(stage, "node-2", request.stages[1]!.runDir));
    expect(context.events.map((e) => e.step)).toContain("ready");
    await Promise.all([exitOf(coordinator), exitOf(stage)]);
  } finally {
    const entry = await world.ledger.read("left-behind");
    if (entry !== undefined) await teardownCluster(entry, { ledger: world.ledger, registrar: world.registrar, nodeFor: world.nodeFor, graceMs: 2_000 });
  }
}, 90_000);

it("a holder from anywhere else is named in PortInUse and left running", async () => {
  const request = await makeRequest(world, { cluster: "someone-else", register: false });
  const holder = await holdPort(request.coordinator.bindHost, request.coordinator.httpPort, world.root);
  const error = (await launchCluster(request, makeContext(world)).then(
    () => undefined,
    (e: unknown) => e,
  )) as LaunchError;
  expect(error).toBeInstanceOf(LaunchError);
  expect(error.reason).toBe("PortInUse");
  expect(error.message).toMatch(
    new RegExp(
      `is already in use on node-1 by pid ${holder.pid} \\(\\S*node -e require\\("node:http"\\).*\\); choose another \\[coordinator\\] port or stop what holds it$`,
    ),
  );
  expect(holder.exitCode).toBeNull();
  expect(holder.signalCode).toBeNull();
}, 90_000);
