/**
 * An edit storm: 100 writes of one definition within 2 s (each an editor-style temp-file-and-rename),
 * most changing only a comment or the router weight (applied in place), a few changing the launch
 * (the model's context length). The daemon converges to the last revision: Ready at exactly the
 * file's final revision, one ledger entry with one launch's processes, no engine of an intermediate
 * launch left running (ps), no port of the transport range held by anything but the recorded launch,
 * and the router serving the final weight.
 */
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Ledger } from "../../src/launch/index.js";
import type { Daemon } from "../../src/reconciler/index.js";
import {
  chat,
  definitionText,
  freePort,
  freePortRange,
  isReadyAt,
  removeDefinition,
  revisionOf,
  sleep,
  startInProcessDaemon,
  startWorld,
  waitForStatus,
  writeDefinition,
  writeSettings,
  type DaemonWorld,
} from "../reconciler/daemon-fixture.js";
import { enginePids, killPids, ledgerNames, listeningSockets, routerBackends } from "./support/world-checks.js";

const run = promisify(execFile);
let world: DaemonWorld;
let daemon: Daemon;
let port: number;
let portRange: string;
/** When the launch before the storm started (the ledger's startedAt). */
let firstStartedAt: string;
const name = "stormy";

/** Revision i of the storm: a comment always, the weight often, the context length at a few points. */
function revisionText(i: number, contextLength: number, weight: number): string {
  const text = definitionText(world, { nodes: ["n1", "n2"], port, portRange, register: true, contextLength });
  return `# edit ${i} of the storm\n${text.replace("register = true", `register = true\nweight = ${weight}`)}`;
}

beforeAll(async () => {
  world = await startWorld({ sshNodes: 2 });
  await writeSettings(world, { router: true, restartBudget: 10 });
  daemon = await startInProcessDaemon(world);
  port = await freePort();
  portRange = await freePortRange(["127.0.0.1", ...world.hosts.values()]);
  await writeDefinition(world, name, revisionText(-1, 256, 1));
  const first = await revisionOf(world, name);
  await waitForStatus(world, name, (s) => isReadyAt(s, first) && s.stages.every((c) => c.alive), 60_000);
  firstStartedAt = (await new Ledger(world.stateDir).read(name))!.startedAt;
}, 90_000);

afterAll(async () => {
  if (world !== undefined) await removeDefinition(world, name, 20_000).catch(() => undefined);
  await daemon?.stop();
  const left = world === undefined ? [] : await enginePids(world);
  const ledger = world === undefined ? [] : await ledgerNames(world);
  killPids(left);
  await world?.close();
  expect(left).toEqual([]);
  expect(ledger).toEqual([]);
}, 60_000);

describe("100 edits of a definition within 2 s", () => {
  it("converges to the last revision with one launch, no orphaned engine and no stray port", async () => {
    // Context length 256 → 320 → 384 → 448 at edits 25, 50, 75 (each a new launch); the weight cycles 1..9.
    const contextAt = (i: number): number => (i < 25 ? 256 : i < 50 ? 320 : i < 75 ? 384 : 448);
    const started = Date.now();
    for (let i = 0; i < 100; i++) {
      await writeDefinition(world, name, revisionText(i, contextAt(i), (i % 9) + 1));
      // Spread over ~2 s whatever the machine's speed.
      const due = started + ((i + 1) * 2_000) / 100;
      if (due > Date.now()) await sleep(due - Date.now());
    }
    expect(Date.now() - started).toBeLessThan(3_000);
    const finalWeight = (99 % 9) + 1;
    const final = await revisionOf(world, name);

    const ready = await waitForStatus(world, name, (s) => isReadyAt(s, final) && s.health === "Healthy" && s.stages.every((c) => c.alive), 45_000);
    expect(ready.observedRevision).toBe(final);
    // Every condition describes the final revision.
    expect(ready.conditions.filter((c) => c.observedRevision !== final)).toEqual([]);

    // One launch: one ledger entry, running, at the final revision; its processes are every engine there is.
    expect(await ledgerNames(world)).toEqual([name]);
    const entry = (await new Ledger(world.stateDir).read(name))!;
    expect(entry.phase).toBe("running");
    expect(entry.revision).toBe(final);
    expect(entry.processes).toHaveLength(3);
    // The context length changed: the launch before the storm was replaced.
    expect(entry.startedAt).not.toBe(firstStartedAt);
    const recorded = new Set(entry.processes.map((p) => p.pid));
    const pids = await enginePids(world);
    // Each recorded process is a wrapper with its one engine child: 3 × 2, nothing else.
    expect(pids).toHaveLength(6);
    for (const pid of pids) {
      if (recorded.has(pid)) continue;
      const parent = Number((await run("ps", ["-o", "ppid=", "-p", String(pid)])).stdout.trim());
      expect(recorded.has(parent)).toBe(true);
    }
    expect(ready.stages.map((s) => s.pid).sort()).toEqual(
      entry.processes
        .filter((p) => p.role === "stage")
        .map((p) => p.pid)
        .sort(),
    );

    // Ports: the transport range holds the recorded launch's ports and nothing else; the coordinator answers.
    const [low, high] = portRange.split("-").map(Number) as [number, number];
    const listening = await listeningSockets();
    const held = listening.filter((s) => s.port >= low && s.port <= high).map((s) => `${s.address}:${s.port}`);
    const recordedPorts = entry.ports.map((p) => `${p.host}:${p.port}`);
    expect(new Set(recordedPorts).size).toBe(recordedPorts.length);
    // The stages listen on their transport ports, the coordinator on its control port (the last stage dials it).
    const transport = entry.ports.filter((p) => p.purpose === "transport" || p.purpose === "control").map((p) => `${p.host}:${p.port}`);
    expect(transport).toHaveLength(3);
    expect(held.sort()).toEqual(transport.sort());
    expect(listening.some((s) => s.port === port)).toBe(true);
    expect(await chat(`http://127.0.0.1:${port}`, world.modelDir)).toBeTypeOf("string");

    // The router serves the final weight, once.
    const backends = await routerBackends(world);
    expect(backends.match(/url:/g)).toHaveLength(1);
    expect(backends).toMatch(new RegExp(`weight: ${finalWeight}\\b`));

    // Still that one launch a moment later: the storm left no pass behind that relaunches.
    await sleep(2_000);
    expect(await enginePids(world)).toEqual(pids);
    expect((await new Ledger(world.stateDir).read(name))!.startedAt).toBe(entry.startedAt);
    expect(world.audit.problems).toEqual([]);
  }, 60_000);
});
