/**
 * kill -9 of the daemon in the middle of a teardown. The definition of a running cluster is deleted;
 * its engine takes 30 s to stop after SIGTERM, so the daemon's teardown sits in its SIGTERM → SIGKILL
 * grace (5 s, the production default) when it is killed. What the killed daemon leaves: the router
 * already deregistered, the ledger entry in phase `tearing-down` with every process, the processes
 * still running, the status file still there (a prune removes it last). The next daemon finishes the
 * teardown: no engine left (ps), no ledger entry, no transport port held, the status file removed.
 */
import { mkdir, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bundledShardEngineCommand, Ledger } from "../../src/launch/index.js";
import {
  definitionText,
  freePort,
  freePortRange,
  isReadyAt,
  processesOf,
  readStatusFile,
  revisionOf,
  sleep,
  spawnDaemon,
  startWorld,
  waitForStatus,
  waitWatching,
  writeDefinition,
  writeSettings,
  type DaemonWorld,
  type SpawnedDaemon,
} from "../reconciler/daemon-fixture.js";
import { killPids, ledgerNames, listeningSockets, routerBackends, until } from "./support/world-checks.js";

let world: DaemonWorld;
const daemons: SpawnedDaemon[] = [];
const name = "doomed";
const script = "slow-stop-engine.sh";

/** The engine processes of this world: wrappers, the slow-stopping script, and shard-engine. */
async function engines(): Promise<number[]> {
  const lines = (await processesOf(world)).filter((l) => l.includes("shard-engine") || l.includes(script));
  return lines.map((l) => Number(l.split(/\s+/)[0])).sort((a, b) => a - b);
}

/**
 * An engine that takes `seconds` to stop: it runs shard-engine as its child and keeps running itself
 * for `seconds` after SIGTERM (sent to the whole process group, so shard-engine exits at once) — or
 * after shard-engine ended by itself first (a stage gives up once its peer is gone, which may come
 * before the SIGTERM of its own group arrives).
 */
async function writeSlowStopEngine(seconds: number): Promise<string> {
  const dir = join(world.root, "bin");
  await mkdir(dir, { recursive: true });
  const path = join(dir, script);
  const ticks = seconds * 10;
  await writeFile(
    path,
    [
      "#!/bin/sh",
      `linger() { i=0; while [ $i -lt ${ticks} ]; do sleep 0.1; i=$((i + 1)); done; exit 0; }`,
      "trap linger TERM",
      `${bundledShardEngineCommand.map((arg) => JSON.stringify(arg)).join(" ")} "$@" &`,
      "wait $!",
      "code=$?",
      // Only a serving engine lingers: a version query (`--version`) answers at once.
      'case " $* " in *" --port "*) linger ;; esac',
      "exit $code",
      "",
    ].join("\n"),
    { mode: 0o755 },
  );
  return path;
}

async function start(): Promise<SpawnedDaemon> {
  const d = await spawnDaemon(world);
  daemons.push(d);
  await waitWatching(d);
  return d;
}

beforeAll(async () => {
  world = await startWorld({ sshNodes: 2 });
  await writeSettings(world, { router: true, restartBudget: 3 });
});

afterAll(async () => {
  for (const d of daemons) if (d.child.exitCode === null && d.child.signalCode === null) d.child.kill("SIGKILL");
  const left = world === undefined ? [] : await engines();
  killPids(left);
  await world?.close();
  expect(left).toEqual([]);
}, 30_000);

describe("kill -9 of the daemon during a teardown", () => {
  it("the next daemon finishes the teardown: no engine, no ledger entry, no port, the status file removed", async () => {
    const binary = await writeSlowStopEngine(30);
    const port = await freePort();
    const portRange = await freePortRange(["127.0.0.1", ...world.hosts.values()]);
    await writeDefinition(world, name, definitionText(world, { nodes: ["n1", "n2"], binary, port, portRange, register: true }));
    const revision = await revisionOf(world, name);
    const first = await start();
    const ready = await waitForStatus(world, name, (s) => isReadyAt(s, revision) && s.health === "Healthy" && s.stages.every((c) => c.alive), 45_000);
    const ledger = new Ledger(world.stateDir);
    const running = (await ledger.read(name))!;
    expect(running.phase).toBe("running");
    expect(await routerBackends(world)).toContain(ready.coordinator!.url);
    const before = await engines();
    // Per process: the wrapper, the slow-stopping script and its shard-engine.
    expect(before).toHaveLength(9);

    // Delete the definition, wait until the teardown has signalled the processes, then kill -9 the daemon.
    await rm(join(world.clustersDir, `${name}.toml`));
    await until(async () => (await ledger.read(name))?.phase === "tearing-down", 10_000, "the teardown began");
    // shard-engine exits on SIGTERM at once; the scripts live on: the teardown is inside its grace period.
    await until(async () => (await processesOf(world)).every((l) => !l.includes("shard-engine") || l.includes(script)), 5_000, "SIGTERM delivered");
    first.child.kill("SIGKILL");
    await first.exited;

    // What the killed daemon left behind.
    const leftover = (await ledger.read(name))!;
    expect(leftover.phase).toBe("tearing-down");
    expect(leftover.processes.map((p) => p.pid).sort()).toEqual(running.processes.map((p) => p.pid).sort());
    expect(leftover.routerBackend).toBeUndefined();
    expect(await routerBackends(world)).not.toContain("url:");
    const orphans = await engines();
    expect(orphans.length).toBeGreaterThanOrEqual(3);
    for (const p of running.processes) expect(orphans).toContain(p.pid);
    // The status file is still there, at the revision it ran: a prune removes it only once the teardown
    // finished. It was rewritten when the teardown began: no longer Ready, not registered, tearing down.
    const mid = (await readStatusFile(world, name))!;
    expect(mid.observedRevision).toBe(revision);
    expect(mid.conditions.find((c) => c.type === "Ready")).toMatchObject({ status: "False", reason: "TearingDown" });
    expect(mid.conditions.find((c) => c.type === "Registered")?.status).toBe("False");
    // Its processes were still being stopped: not said to be gone ("no stage runs").
    expect(mid.conditions.find((c) => c.type === "StagesListening")).toMatchObject({ status: "False", reason: "TearingDown" });
    expect(mid.conditions.find((c) => c.type === "StagesListening")?.message).toMatch(/^tearing down revision \w+: the stages are being stopped$/);
    expect(mid.health).not.toBe("Healthy");

    // The next daemon finishes the teardown (SIGTERM again, the grace, SIGKILL) and prunes the status file.
    await sleep(200);
    const second = await start();
    const startedAt = Date.now();
    await until(async () => (await readStatusFile(world, name)) === undefined, 20_000, "status file removed");
    const prunedMs = Date.now() - startedAt;
    expect(await engines()).toEqual([]);
    expect(await ledgerNames(world)).toEqual([]);
    expect(await routerBackends(world)).not.toContain("url:");
    const held = (await listeningSockets()).filter((s) => running.ports.some((p) => p.port === s.port && p.host === s.address));
    expect(held).toEqual([]);
    // Nothing of the cluster comes back: no launch, no status file, a moment later.
    await sleep(1_500);
    expect(await readStatusFile(world, name)).toBeUndefined();
    expect(await engines()).toEqual([]);
    expect(second.stderr()).toMatch(/"action":"prune"/);
    // The leftover groups ignore SIGTERM for 30 s: only the grace (5 s) and SIGKILL ended them, which
    // the daemon's log says — the coordinator's, then the stages' (they wait for it at most its grace).
    expect(prunedMs).toBeLessThan(20_000);
    expect(second.stderr()).toMatch(/"msg":"a process did not stop within its grace period after SIGTERM: SIGKILLed"/);
    second.child.kill("SIGTERM");
    expect(await second.exited).toBe(0);
    expect(world.audit.problems).toEqual([]);
  }, 60_000);
});
