/**
 * The coordinator's HTTP port held when a launch starts. By a process started from this cluster's
 * own run directory (what an engine that detached itself with a clean environment leaves, out of
 * reach of the teardown's process group and mark): it is stopped, said in the timeline, and the
 * launch goes on. By anything else: PortInUse names the holder's pid and command line. Real
 * processes on a loopback sshd node. Needs `npm run build`.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { LaunchError, launchCluster, teardownCluster } from "../../src/launch/index.js";
import { makeContext, makeRequest, startLifecycleWorld, type LifecycleWorld } from "./lifecycle-fixture.js";

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

it("a holder started from the cluster's run directory is this cluster's leftover: stopped, and the launch serves", async () => {
  const request = await makeRequest(world, { cluster: "left-behind", register: false });
  const holder = await holdPort(request.coordinator.bindHost, request.coordinator.httpPort, request.coordinator.runDir);
  const exited = new Promise((resolve) => holder.once("exit", resolve));
  const context = makeContext(world);
  try {
    await launchCluster(request, context);
    const said = context.events.find((e) => e.step === "leftover-stopped");
    expect(said?.detail).toMatch(
      new RegExp(`^pid ${holder.pid} \\(.*node.*\\), started from ${request.coordinator.runDir} by an earlier launch, held the coordinator's HTTP port: stopped$`),
    );
    expect(context.events.map((e) => e.step)).toContain("ready");
    await exited;
  } finally {
    const entry = await world.ledger.read("left-behind");
    if (entry !== undefined) await teardownCluster(entry, { ledger: world.ledger, registrar: world.registrar, nodeFor: world.nodeFor, graceMs: 2_000 });
  }
}, 90_000);

it("a holder from anywhere else is named in PortInUse and left running", async () => {
  const request = await makeRequest(world, { cluster: "someone-else", register: false });
  const holder = await holdPort(request.coordinator.bindHost, request.coordinator.httpPort, join(world.root));
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
