/**
 * An engine that ignores SIGTERM at teardown: a stand-in stage-0 that listens on its transport
 * port (so the launch goes on) and traps SIGTERM, never exiting by itself. The launch fails at the
 * coordinator (which cannot talk to it), and its teardown escalates to SIGKILL once the grace
 * period ran out: said as it happens (`stage-0-killing`, which the status file shows during a
 * launch's teardown), bounded, the port freed, nothing left in the ledger or on any node. Real
 * processes on real sshd nodes. Needs `npm run build`.
 */
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { bundledShardEngineCommand, LaunchError, launchCluster } from "../../src/launch/index.js";
import { makeContext, makeRequest, processesMentioning, startLifecycleWorld, type LifecycleWorld } from "./lifecycle-fixture.js";

let world: LifecycleWorld;

beforeAll(async () => {
  world = await startLifecycleWorld();
});
afterAll(async () => {
  await world?.close();
});

/** stage-0 is a listener that traps SIGTERM; everything else is the real shard-engine. */
async function termIgnoringEngine(): Promise<string> {
  const listener = join(world.root, "bin", "term-ignoring-stage.mjs");
  await writeFile(
    listener,
    `import { createServer } from "node:net";
const args = process.argv.slice(2);
const value = (flag) => args[args.indexOf(flag) + 1];
process.on("SIGTERM", () => console.log("stand-in stage: SIGTERM ignored"));
createServer((socket) => socket.on("error", () => {})).listen(Number(value("--port")), value("--host"), () => console.log("stand-in stage listening"));
`,
  );
  const path = join(world.root, "bin", "term-ignoring.sh");
  const engine = bundledShardEngineCommand.map((arg) => JSON.stringify(arg)).join(" ");
  await writeFile(
    path,
    `#!/bin/sh\ncase " $* " in *" --node-id stage-0 "*) exec ${JSON.stringify(process.execPath)} ${JSON.stringify(listener)} "$@" ;; esac\nexec ${engine} "$@"\n`,
    { mode: 0o755 },
  );
  return path;
}

it("stage-0 ignores SIGTERM: SIGKILL after the grace period, said as it is sent; its port freed, nothing left", async () => {
  const request = await makeRequest(world, {
    cluster: "ignores-term",
    binary: await termIgnoringEngine(),
    deadlines: { coordinatorHealthMs: 6_000, stopGraceMs: 1_500 },
  });
  const context = makeContext(world);
  const error = await launchCluster(request, context).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(LaunchError);
  const steps = context.events.map((e) => e.step);
  const listening = context.events.find((e) => e.step === "stage-0-listening")!;
  const [host, port] = listening.detail!.split(":") as [string, string];

  // Said as it is sent, before the teardown's outcome for it.
  const killing = context.events.find((e) => e.step === "stage-0-killing");
  expect(killing, steps.join(" ")).toBeDefined();
  expect(killing!.detail).toMatch(/^pid \d+ still ran 1500 ms after SIGTERM: SIGKILL, then up to 5000 ms for it to go \(on node-1\)$/);
  expect(steps.indexOf("stage-0-killing")).toBeLessThan(steps.indexOf("stage-0-stopped"));
  expect(context.events.find((e) => e.step === "stage-0-stopped")!.detail).toMatch(/^killed \(pid \d+ on node-1\)$/);
  // The others went at SIGTERM: nothing else was killed.
  expect(steps.filter((s) => s.endsWith("-killing"))).toEqual(["stage-0-killing"]);
  expect(steps.at(-1)).toBe("torn-down");

  // Nothing left: no process, no ledger entry, the port free again.
  expect(await processesMentioning(world, join(world.root, "run", "ignores-term"))).toEqual([]);
  expect(await world.ledger.read("ignores-term")).toBeUndefined();
  expect(await world.nodeFor("node-1").isPortOpen(host, Number(port), 1_000)).toBe(false);
}, 60_000);
