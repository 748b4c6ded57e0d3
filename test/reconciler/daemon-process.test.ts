/**
 * The daemon as a real process: one per directory (a second is refused naming the first's pid);
 * `kill -9` in the middle of a launch leaves nothing orphaned after the next start, which converges;
 * SIGTERM leaves clusters running and the next daemon adopts them without a restart.
 */
import { existsSync } from "node:fs";
import { rm } from "node:fs/promises";
import { join } from "node:path";
import { expect, test } from "vitest";
import { Ledger, type LedgerEntry } from "../../src/launch/index.js";
import {
  conditionOf,
  enginesOf,
  isReadyAt,
  readStatusFile,
  runShardctl,
  sleep,
  waitForStatus,
  writeSettings,
  writeSlowEngine,
  type SpawnedDaemon,
} from "./daemon-fixture.js";
import { useDaemonWorld } from "./use-daemon-world.js";

// The tests spawn the daemons (real processes); any still running afterwards is killed.
const dw = useDaemonWorld({ sshNodes: 2, settings: { restartBudget: 3 }, daemon: "none" });
const start = (): Promise<SpawnedDaemon> => dw.spawnDaemon();

async function stopGracefully(d: SpawnedDaemon): Promise<number | null> {
  d.child.kill("SIGTERM");
  return d.exited;
}

test("a second daemon on the same directory is refused, naming the first one's pid", async () => {
  const first = await start();
  const second = await dw.spawnDaemon({ waitWatching: false });
  const code = await second.exited;
  expect(code).toBe(1);
  expect(second.stderr()).toContain(`pid ${first.child.pid}`);
  expect(second.stderr()).toMatch(/already watches/);
  // The first one is unharmed.
  expect(first.child.exitCode).toBeNull();
  expect(await stopGracefully(first), first.stderr()).toBe(0);
});

// Regression: SIGHUP (the terminal a daemon runs in closed) killed it outright: exit 129, its lock
// left behind and, with --teardown-on-exit, its clusters left running.
test("SIGHUP stops a daemon as SIGTERM does: exit 0, its lock removed", async () => {
  const daemon = await start();
  daemon.child.kill("SIGHUP");
  expect(await daemon.exited, daemon.stderr()).toBe(0);
  expect(existsSync(join(dw.world.clustersDir, ".shardctl-daemon.lock"))).toBe(false);
});

test("a daemon whose lock was removed and taken by a second daemon meanwhile stops on its own (exit 1, saying why), leaving the second to run", async () => {
  // Beats 8 s apart: the second daemon (a start takes about 0.5 s, a few seconds on a loaded
  // machine) starts well within the gap.
  await writeSettings(dw.world, { restartBudget: 3, heartbeatSeconds: 8 });
  try {
    const first = await start();
    await rm(join(dw.world.clustersDir, ".shardctl-daemon.lock"));
    // Started in the gap before the first's next beat writes its lock again.
    const second = await start();
    const code = await Promise.race([first.exited, sleep(40_000).then(() => "still running")]);
    expect(code, first.stderr()).toBe(1);
    expect(first.stderr()).toContain(`another shardctl daemon (pid ${second.child.pid}) took the lock`);
    expect(second.child.exitCode).toBeNull();
    expect(await stopGracefully(second), second.stderr()).toBe(0);
  } finally {
    await writeSettings(dw.world, { restartBudget: 3 });
  }
});

test("kill -9 of the daemon during a launch → the next start leaves no orphan and converges; SIGTERM leaves it running, the next daemon adopts it", async () => {
  const { world } = dw;
  const ledger = new Ledger(world.stateDir);
  const slow = await writeSlowEngine(world, 1);
  const revision = await dw.define("kappa", { nodes: ["n1", "n2"], binary: slow });
  const first = await start();

  // While it launches, Ready says so (not the staging that came before).
  const launching = await waitForStatus(world, "kappa", (s) => conditionOf(s, "Ready")?.reason === "Launching", 20_000);
  expect(conditionOf(launching, "Ready")).toMatchObject({ status: "False" });
  expect(conditionOf(launching, "Ready")!.message).toMatch(/^nothing serves this revision yet: its processes are starting/);
  // Wait until the launch has started processes but is not finished, then kill -9 the daemon.
  let entry: LedgerEntry | undefined;
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    entry = await ledger.read("kappa").catch(() => undefined);
    // A started process (pid > 0): a record with pid 0 is one planned but not started yet.
    if (entry?.phase === "launching" && entry.processes.some((p) => p.pid > 0)) break;
    await sleep(20);
  }
  expect(entry?.phase).toBe("launching");
  first.child.kill("SIGKILL");
  await first.exited;
  const orphanPids = entry!.processes.map((p) => p.pid).filter((pid) => pid > 0);
  await sleep(300);
  // They are orphans now (their daemon is gone).
  const running = await enginesOf(world);
  expect(running.length).toBeGreaterThan(0);

  // The next start cleans up and converges.
  const second = await start();
  const ready = await waitForStatus(world, "kappa", (s) => isReadyAt(s, revision) && s.stages.every((c) => c.alive), 40_000);
  const now = (await ledger.read("kappa"))!;
  expect(now.phase).toBe("running");
  const engines = await enginesOf(world);
  for (const pid of orphanPids) expect(engines.some((l) => l.startsWith(`${pid} `))).toBe(false);
  const recorded = new Set(now.processes.map((p) => p.pid));
  // Every process of the world is one the ledger records (a wrapper) or a recorded wrapper's engine.
  for (const line of engines) {
    const [pid, , ...args] = line.split(/\s+/);
    if (recorded.has(Number(pid))) continue;
    expect(args.join(" ")).not.toMatch(/^sh -c/);
  }
  expect(engines.filter((l) => !/^\d+\s+\S+\s+sh -c/.test(l))).toHaveLength(3);
  // The launch the kill cut short is given back to the budget: only the one that finished counts.
  expect(ready.restarts?.count).toBe(1);

  // SIGTERM: the daemon exits, the cluster keeps running (it is desired state).
  expect(await stopGracefully(second), second.stderr()).toBe(0);
  // The same processes: pid and command line (the ps state column, S or R, is the moment's, not theirs).
  const identities = async (): Promise<string[]> => (await enginesOf(world)).map((line) => line.replace(/^(\s*\d+)\s+\S+/, "$1")).sort();
  const before = await identities();
  expect(before).toHaveLength(6);
  expect(second.stderr()).toContain("daemon stopped");

  // A reconcile asked for while no daemon runs waits for the next one, which takes it before its
  // first pass: the status it writes for the request keeps what the file said (the stages, the
  // model), not a status composed from a memory that knows none of it.
  const asked = await runShardctl(world, ["reconcile", "kappa"]);
  expect(asked.code).toBe(1);
  const seenBefore = world.audit.versions.length;

  // The next daemon adopts it: same processes, no new launch.
  const third = await start();
  await waitForStatus(world, "kappa", (s) => s.history.length > 0 && s.history.at(-1)!.action === "none" && isReadyAt(s, revision), 20_000);
  const written = world.audit.statusesOf("kappa", seenBefore);
  expect(written.length).toBeGreaterThan(0);
  expect(written.filter((v) => v.model === undefined || v.stages.length !== 2 || v.conditions.some((c) => c.observedRevision === ""))).toEqual([]);
  expect(await identities()).toEqual(before);
  expect((await ledger.read("kappa"))!.startedAt).toBe(now.startedAt);

  // Delete → pruned: nothing left in ps.
  await rm(join(world.clustersDir, "kappa.toml"));
  const gone = Date.now() + 20_000;
  while ((await readStatusFile(world, "kappa")) !== undefined && Date.now() < gone) await sleep(100);
  expect(await readStatusFile(world, "kappa")).toBeUndefined();
  expect(await enginesOf(world)).toEqual([]);
  expect(await stopGracefully(third), third.stderr()).toBe(0);
});

// Regression: a daemon killed just after a launch said it started, before its ledger entry was
// written (the run folders claimed, leftovers looked for), spent the restart budget for nothing:
// the next daemon found no "launching" entry to give back. Crash-looping daemons stalled clusters
// in which nothing had failed.
test("kill -9 of the daemon as a launch starts: the launch is recorded at once, and the next daemon does not count it", async () => {
  const { world } = dw;
  const ledger = new Ledger(world.stateDir);
  const revision = await dw.define("lambda", { nodes: ["n1", "n2"] });
  const first = await start();
  const deadline = Date.now() + 60_000;
  let started = false;
  while (!started && Date.now() < deadline) {
    started = (await readStatusFile(world, "lambda").catch(() => undefined))?.timeline.some((e) => e.step === "launch-started") === true;
    if (!started) await sleep(5);
  }
  expect(started).toBe(true);
  first.child.kill("SIGKILL");
  await first.exited;
  // Whatever the moment of the kill after the launch said it started, its entry is there to be given back.
  expect((await ledger.read("lambda"))?.phase).toBe("launching");

  const second = await start();
  const ready = await waitForStatus(world, "lambda", (s) => isReadyAt(s, revision) && s.stages.every((c) => c.alive), 60_000);
  expect(ready.restarts?.count).toBe(1);
  await rm(join(world.clustersDir, "lambda.toml"));
  const gone = Date.now() + 20_000;
  while ((await readStatusFile(world, "lambda")) !== undefined && Date.now() < gone) await sleep(100);
  expect(await enginesOf(world)).toEqual([]);
  expect(await stopGracefully(second), second.stderr()).toBe(0);
}, 150_000);
