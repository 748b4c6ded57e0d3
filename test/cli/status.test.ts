/** `shardctl status`: the list (one line per cluster) and one cluster's per-stage detail, from real status files. */
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, expect, test } from "vitest";
import type { ClusterStatus, Daemon } from "../../src/reconciler/index.js";
import {
  definitionText,
  readStatusFile,
  enginesOf,
  freePort,
  freePortRange,
  isReadyAt,
  killEnginesOf,
  revisionOf,
  runShardctl,
  sleep,
  startInProcessDaemon,
  startWorld,
  waitForStatus,
  writeDefinition,
  writeSettings,
  type DaemonWorld,
} from "../reconciler/daemon-fixture.js";

let world: DaemonWorld;
let daemon: Daemon;
beforeAll(async () => {
  world = await startWorld();
  // Two local nodes, distributed serving on: a real cluster on this machine.
  await writeSettings(world, { enabled: true });
  daemon = await startInProcessDaemon(world);
  await writeDefinition(world, "live", definitionText(world, { nodes: ["l1", "l2"], port: await freePort(), portRange: await freePortRange(["127.0.0.1"]) }));
  await writeDefinition(world, "idle", definitionText(world, { nodes: ["l2", "l1"], desired: "stopped" }));
  const revision = await revisionOf(world, "live");
  await waitForStatus(world, "live", (s) => isReadyAt(s, revision) && s.stages.every((c) => c.alive));
  await waitForStatus(world, "idle", (s) => s.health === "Stopped");
});
afterAll(async () => {
  if (daemon !== undefined) {
    await writeDefinition(world, "live", definitionText(world, { nodes: ["l1", "l2"], desired: "stopped" }));
    await waitForStatus(world, "live", (s) => s.health === "Stopped").catch(() => undefined);
    await daemon.stop();
  }
  await sleep(100);
  const left = world === undefined ? [] : await enginesOf(world);
  await world?.close();
  expect(left).toEqual([]);
});

test("list: one line per cluster with badge, health, model, stages, endpoint, age", async () => {
  const r = await runShardctl(world, ["status"]);
  expect(r.code).toBe(0);
  // The daemon (in this process) holds the directory's lock: no "nobody is watching" note.
  expect(r.stderr).not.toContain("no shardctl daemon is watching");
  const lines = r.stdout.trim().split("\n");
  expect(lines[0]).toMatch(/^NAME\s+HEALTH\s+MODEL\s+STAGES\s+ENDPOINT\s+AGE$/);
  const idle = lines.find((l) => l.startsWith("idle"))!;
  const live = lines.find((l) => l.startsWith("live"))!;
  expect(live).toMatch(/^live\s+\[cluster\]\s+Healthy\s+\S*tiny-llama\s+2\/2\s+http:\/\/127\.0\.0\.1:\d+\s+\d+s$/);
  expect(idle).toMatch(/^idle\s+\[cluster\]\s+Stopped\s+\S*tiny-llama\s+0\/2\s+-\s+-$/);
});

test("detail: the per-stage cards, the coordinator and the conditions", async () => {
  const r = await runShardctl(world, ["status", "live"]);
  expect(r.code).toBe(0);
  expect(r.stdout).toMatch(/^live \[cluster\]\s+Healthy\s+revision [0-9a-f]{12}/);
  expect(r.stdout).toMatch(/^STAGE\s+NODE\s+LAYERS\s+PID\s+ALIVE\s+TRANSPORT\s+ADDRESS\s+SINCE$/m);
  expect(r.stdout).toMatch(/^0\s+l1\s+\[0, 2\)\s+\d+\s+yes\s+listening\s+127\.0\.0\.1:\d+\s+\d+s$/m);
  expect(r.stdout).toMatch(/^1\s+l2\s+\[2, 4\)\s+\d+\s+yes\s+listening\s+127\.0\.0\.1:\d+\s+\d+s$/m);
  expect(r.stdout).toMatch(/coordinator on local: http:\/\/127\.0\.0\.1:\d+ health ok/);
  expect(r.stdout).toMatch(/^Ready\s+True\s+ClusterReady\s+serving at/m);
  // Every condition is about the revision in the header: no REVISION column.
  expect(r.stdout).toMatch(/^CONDITION\s+STATUS\s+REASON\s+MESSAGE$/m);
});

test("--json: the status files as JSON (a list, or one object for one cluster)", async () => {
  const list = JSON.parse((await runShardctl(world, ["status", "--json"])).stdout) as Array<{ cluster: string; health: string }>;
  expect(list.map((s) => [s.cluster, s.health])).toEqual([
    ["idle", "Stopped"],
    ["live", "Healthy"],
  ]);
  const one = JSON.parse((await runShardctl(world, ["status", "live", "--json"])).stdout) as { cluster: string; stages: unknown[] };
  expect(one.cluster).toBe("live");
  expect(one.stages).toHaveLength(2);
});

test("--watch on a terminal redraws the cluster's cards in place until Ctrl-C, then exits 0", async () => {
  const { spawn } = await import("node:child_process");
  const { shardctlJs } = await import("../reconciler/daemon-fixture.js");
  // A real terminal: util-linux's script(1) runs the command on a pseudo-terminal, through
  // `$SHELL -c` (/bin/sh when SHELL is unset). `exec`: the shell becomes shardctl. Dash would
  // otherwise wait as its parent, and be killed by the Ctrl-C itself (130) while shardctl exits 0.
  const command =
    "exec " + [process.execPath, shardctlJs, "status", "live", "--watch", "--config", world.settingsFile, "--dir", world.clustersDir].map((a) => `'${a}'`).join(" ");
  const child = spawn("script", ["-qfec", command, "/dev/null"], { stdio: ["pipe", "pipe", "pipe"] });
  let out = "";
  child.stdout.on("data", (d: Buffer) => (out += d.toString()));
  const closed = new Promise<number | null>((resolve) => child.once("close", (code) => resolve(code)));
  // Generous: on a loaded machine Node's start alone can take seconds, and a Ctrl-C that arrives
  // before the process runs any of its code ends it by the signal (130), as it should.
  const deadline = Date.now() + 30_000;
  // Two frames: it redraws (clear screen + home) rather than printing once.
  const clear = "\x1b[H\x1b[2J";
  while (out.split(clear).length - 1 < 2 && Date.now() < deadline) await sleep(100);
  expect(out.split(clear).length - 1, `two frames within 30 s; the terminal showed:\n${out}`).toBeGreaterThanOrEqual(2);
  // Ctrl-C, as typed: the terminal sends the foreground process SIGINT.
  child.stdin.write("\x03");
  expect(await closed, `the exit status after Ctrl-C; the terminal showed:\n${out}`).toBe(0);
  const frames = out.split(clear).filter((f) => f.trim() !== "");
  expect(frames.length).toBeGreaterThanOrEqual(2);
  expect(frames[0]).toMatch(/^live \[cluster\]\s+Healthy/);
  expect(frames[0]).toMatch(/^0\s+l1\s+\[0, 2\)\s+\d+\s+yes\s+listening/m);
  expect(frames[0]).toContain("Ctrl-C to quit");
});

test("--watch into a pipe: snapshots without terminal codes (with --json, one document per line); it exits 0 when the reader goes", async () => {
  const { spawn } = await import("node:child_process");
  const { shardctlJs } = await import("../reconciler/daemon-fixture.js");
  for (const json of [false, true]) {
    const child = spawn(process.execPath, [shardctlJs, "status", "--watch", ...(json ? ["--json"] : []), "--config", world.settingsFile, "--dir", world.clustersDir], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    let err = "";
    child.stdout.on("data", (d: Buffer) => (out += d.toString()));
    child.stderr.on("data", (d: Buffer) => (err += d.toString()));
    const closed = new Promise<number | null>((resolve) => child.once("close", (code) => resolve(code)));
    const deadline = Date.now() + 10_000;
    const snapshots = (): string[] => (json ? out.split("\n").filter((l) => l !== "") : out.split("\n\n").filter((f) => f.trim() !== ""));
    while (snapshots().length < 2 && Date.now() < deadline) await sleep(100);
    expect(out).not.toContain("\x1b");
    expect(out).not.toContain("Ctrl-C");
    if (json) {
      for (const line of snapshots()) expect((JSON.parse(line) as Array<{ cluster: string }>).map((s) => s.cluster)).toEqual(["idle", "live"]);
    } else {
      expect(snapshots().length).toBeGreaterThanOrEqual(2);
      expect(snapshots()[0]).toMatch(/^NAME\s+HEALTH/);
    }
    // The reader goes (as `| head` does): the next write fails with EPIPE, and it exits quietly.
    child.stdout.destroy();
    expect(await closed).toBe(0);
    expect(err).not.toMatch(/EPIPE|at .*\.js:\d+/);
  }
});

test("an invalid settings edit leaves the serving cluster Ready; status still prints, with a warning", async () => {
  const { readFile, writeFile } = await import("node:fs/promises");
  const good = await readFile(world.settingsFile, "utf8");
  const before = (await readStatusFile(world, "live"))!.stages.map((s) => s.pid);
  try {
    await writeFile(world.settingsFile, good.replace(/restart_budget = \d+/, 'restart_budget = "three"'));
    const status = await waitForStatus(world, "live", (s) => s.conditions.some((c) => c.type === "Stalled" && c.status === "True" && c.reason === "InvalidSettings"));
    expect(status.conditions.find((c) => c.type === "Ready")?.status).toBe("True");
    expect(status.health).toBe("Degraded");
    const r = await runShardctl(world, ["status"]);
    expect(r.code).toBe(0);
    expect(r.stderr).toMatch(/^warning: .*shardctl\.toml:\d+:\d+: daemon\.restart_budget/m);
    expect(r.stdout).toMatch(/^live\s/m);
  } finally {
    await writeFile(world.settingsFile, good);
  }
  const healed = await waitForStatus(world, "live", (s) => s.health === "Healthy" && s.conditions.some((c) => c.type === "Stalled" && c.status === "False"));
  expect(healed.stages.map((s) => s.pid)).toEqual(before);
});

test("a daemon watching another (empty) directory with the same state_dir never prunes this one's cluster", async () => {
  const { mkdir } = await import("node:fs/promises");
  const { join } = await import("node:path");
  const { pino } = await import("pino");
  const { startDaemon } = await import("../../src/reconciler/index.js");
  const before = (await readStatusFile(world, "live"))!.stages.map((s) => s.pid);
  const empty = join(world.root, "elsewhere");
  await mkdir(empty);
  const other = await startDaemon({ dir: empty, settingsFile: world.settingsFile, log: pino({ level: "silent" }), resyncMs: 60_000 });
  await other.whenIdle();
  await sleep(500);
  await other.stop();
  const after = await readStatusFile(world, "live");
  expect(after!.health).toBe("Healthy");
  expect(after!.stages.map((s) => s.pid)).toEqual(before);
  expect((await enginesOf(world)).length).toBe(6);
});

test("says when no daemon watches the directory (the files are then only what it last wrote)", async () => {
  const other = await startWorld();
  try {
    await writeSettings(other, { enabled: false });
    const r = await runShardctl(other, ["status"]);
    expect(r.code).toBe(0);
    expect(r.stderr).toContain(`note: no shardctl daemon is watching ${other.clustersDir}`);
    // A reconcile request with nobody to take it fails, rather than pretending.
    await writeDefinition(other, "lonely", definitionText(other, { nodes: ["l1", "l2"] }));
    const asked = await runShardctl(other, ["reconcile", "lonely"]);
    expect(asked.code).toBe(1);
    expect(asked.stderr).toContain(`no shardctl daemon is watching ${other.clustersDir}`);
    // A file outside the watched directory would name (and reset the budget of) the watched
    // cluster of that file name; a file name that is no cluster name names nothing the daemon has.
    const outside = join(other.root, "lonely.toml");
    await writeFile(outside, definitionText(other, { nodes: ["l1", "l2"] }));
    const elsewhere = await runShardctl(other, ["reconcile", outside]);
    expect(elsewhere.code).not.toBe(0);
    expect(elsewhere.stderr).toContain(`${outside} is not in ${other.clustersDir}, the directory the daemon watches`);
    await writeFile(join(other.clustersDir, "...toml"), definitionText(other, { nodes: ["l1", "l2"] }));
    const dots = await runShardctl(other, ["reconcile", join(other.clustersDir, "...toml")]);
    expect(dots.code).not.toBe(0);
    expect(dots.stderr).toContain('".." is not a cluster name');
    // Listed as people number them: c2 before c10.
    for (const name of ["c10", "c2"]) await writeDefinition(other, name, definitionText(other, { nodes: ["l1", "l2"] }));
    const listed = (await runShardctl(other, ["status"])).stdout.split("\n").map((line) => line.split(/\s+/)[0]);
    expect(listed.filter((name) => ["c10", "c2", "lonely"].includes(name!))).toEqual(["c2", "c10", "lonely"]);
  } finally {
    await other.close();
  }
});

// Regression: a cluster stopped before it ever ran showed 0/0, one stopped while running 0/0 or 0/2
// depending on whether the daemon still held a plan for it.
test("a stopped cluster shows 0/N stages however it stopped, and its nodes in the detail", async () => {
  const { rm } = await import("node:fs/promises");
  const { join } = await import("node:path");
  await writeDefinition(world, "halt", definitionText(world, { nodes: ["l2", "l1"], port: await freePort(), portRange: await freePortRange(["127.0.0.1"]) }));
  const revision = await revisionOf(world, "halt");
  await waitForStatus(world, "halt", (s) => isReadyAt(s, revision));
  await writeDefinition(world, "halt", definitionText(world, { nodes: ["l2", "l1"], desired: "stopped" }));
  await waitForStatus(world, "halt", (s) => s.health === "Stopped");
  try {
    const lines = (await runShardctl(world, ["status"])).stdout.trim().split("\n");
    expect(lines.find((l) => l.startsWith("halt"))).toMatch(/^halt\s+\[cluster\]\s+Stopped\s+\S*tiny-llama\s+0\/2\s+-\s+-$/);
    expect(lines.find((l) => l.startsWith("idle"))).toMatch(/^idle\s+\[cluster\]\s+Stopped\s+\S*tiny-llama\s+0\/2\s+-\s+-$/);
    const detail = (await runShardctl(world, ["status", "halt"])).stdout;
    expect(detail).toMatch(/^0\s+l2\s+-\s+-\s+-\s+-\s+-\s+-$/m);
    expect(detail).toMatch(/^1\s+l1\s+-\s+-\s+-\s+-\s+-\s+-$/m);
  } finally {
    await rm(join(world.clustersDir, "halt.toml"));
    const deadline = Date.now() + 20_000;
    while ((await readStatusFile(world, "halt")) !== undefined && Date.now() < deadline) await sleep(100);
  }
});

// Regression: the list came from the definitions alone, so a cluster whose definition was removed
// while it still ran (a prune held up by a node, a mass prune refused, a definition removed while
// no daemon ran) was missing from `status` and `status --json`, and `status <name>` said it did not exist.
test("a cluster whose definition is gone but whose status stays is listed as such until the daemon prunes it", async () => {
  const other = await startWorld();
  try {
    await writeSettings(other, { enabled: true });
    let own = await startInProcessDaemon(other);
    await writeDefinition(other, "gone", definitionText(other, { nodes: ["l1", "l2"], port: await freePort(), portRange: await freePortRange(["127.0.0.1"]) }));
    const revision = await revisionOf(other, "gone");
    await waitForStatus(other, "gone", (s) => isReadyAt(s, revision));
    // The daemon stops (its cluster keeps running), and the definition is removed meanwhile.
    await own.stop();
    const { rm } = await import("node:fs/promises");
    await rm(join(other.clustersDir, "gone.toml"));
    const list = await runShardctl(other, ["status"]);
    expect(list.code, list.stderr).toBe(0);
    expect(list.stdout).toMatch(/^gone\s+\[definition removed\]\s+Healthy\s+\S*tiny-llama\s+2\/2\s+http:\/\/127\.0\.0\.1:\d+\s+\d+s$/m);
    // The daemon that wrote the file never saw the removal: the JSON marks it as the daemon would.
    expect((await readStatusFile(other, "gone"))?.definitionRemoved).toBeUndefined();
    const json = JSON.parse((await runShardctl(other, ["status", "--json"])).stdout) as Array<{ cluster: string; definitionRemoved?: boolean }>;
    expect(json.map((s) => [s.cluster, s.definitionRemoved])).toEqual([["gone", true]]);
    const one = JSON.parse((await runShardctl(other, ["status", "gone", "--json"])).stdout) as { cluster: string; definitionRemoved?: boolean };
    expect(one).toMatchObject({ cluster: "gone", definitionRemoved: true });
    const detail = await runShardctl(other, ["status", "gone"]);
    expect(detail.code, detail.stderr).toBe(0);
    expect(detail.stdout).toContain("its definition is gone: the daemon tears it down");
    // A daemon again: the cluster is pruned, and with its status file it leaves the list.
    own = await startInProcessDaemon(other);
    const deadline = Date.now() + 30_000;
    while ((await readStatusFile(other, "gone")) !== undefined && Date.now() < deadline) await sleep(100);
    await own.stop();
    expect((await runShardctl(other, ["status"])).stdout).not.toMatch(/^gone/m);
    expect(await enginesOf(other)).toEqual([]);
  } finally {
    // Whatever an assertion above left running (the cluster launched for the test) goes with the world.
    await killEnginesOf(other);
    await other.close();
  }
});

// Regression: a stage whose node did not answer its liveness probe (a loaded or cut node) counted as
// down: a cluster serving with Ready True read `0/2`, as a stopped one does.
test("the list counts a stage whose node does not answer apart, neither up nor down; the detail says an invalid definition's commit is not the serving revision's", async () => {
  const other = await startWorld();
  try {
    const { readFile } = await import("node:fs/promises");
    const fixtures = JSON.parse(await readFile(join(import.meta.dirname, "../dashboard/fixtures/fault-statuses.json"), "utf8")) as { healthy: ClusterStatus };
    const healthy = fixtures.healthy;
    const doubt = {
      ...healthy,
      health: "Degraded" as const,
      stages: healthy.stages.map((s) => (s.index === 1 ? { ...s, alive: false, liveness: "unknown" as const } : s)),
    };
    await writeDefinition(other, healthy.cluster, definitionText(other, { nodes: ["l1", "l2"] }));
    await writeFile(join(other.clustersDir, `${healthy.cluster}.status.json`), JSON.stringify(doubt));
    const list = await runShardctl(other, ["status"]);
    expect(list.code, list.stderr).toBe(0);
    expect(list.stdout).toMatch(new RegExp(`^${healthy.cluster}\\s+\\[cluster\\]\\s+Degraded\\s+\\S+\\s+1/2 \\(1 unknown\\)\\s`, "m"));
    await writeFile(join(other.clustersDir, `${healthy.cluster}.status.json`), JSON.stringify(healthy));
    expect((await runShardctl(other, ["status"])).stdout).toMatch(new RegExp(`^${healthy.cluster}\\s+\\[cluster\\]\\s+Healthy\\s+\\S+\\s+2/2\\s`, "m"));
    // The status written at a launch's last step has no cards yet (the daemon has not looked at what
    // it started): its stages are the launch's, up, not 0 of 2.
    const complete = {
      ...healthy,
      health: "Progressing" as const,
      stages: [],
      conditions: healthy.conditions.map((c) =>
        c.type === "Ready" ? { ...c, status: "False" as const, reason: "Launching", message: "nothing serves this revision yet: its launch is complete" } : c,
      ),
      timeline: [
        { at: "2026-12-02T03:45:34.100Z", step: "launch-started" },
        { at: "2026-12-02T03:45:34.200Z", step: "stage-0-started", detail: "pid 41000 on n1, layers [0, 2)" },
        { at: "2026-12-02T03:45:34.210Z", step: "stage-1-started", detail: "pid 41010 on n2, layers [2, 4)" },
        { at: "2026-12-02T03:45:34.700Z", step: "stage-0-listening", detail: "127.0.0.2:39661" },
        { at: "2026-12-02T03:45:34.720Z", step: "stage-1-listening", detail: "127.0.0.3:39661" },
        { at: "2026-12-02T03:45:35.450Z", step: "ready" },
      ],
    };
    await writeFile(join(other.clustersDir, `${healthy.cluster}.status.json`), JSON.stringify(complete));
    expect((await runShardctl(other, ["status"])).stdout).toMatch(new RegExp(`^${healthy.cluster}\\s+\\[cluster\\]\\s+Progressing\\s+\\S+\\s+2/2\\s`, "m"));
    const detail = (await runShardctl(other, ["status", healthy.cluster])).stdout;
    expect(detail).toMatch(/^1\s+n2\s+\[2, 4\)\s+41010\s+yes\s+listening\s+127\.0\.0\.3:39661\s/m);
    // An invalid edit committed: its commit is not the revision that serves, and the header says so.
    const stalled = {
      ...healthy,
      gitCommit: "b".repeat(40),
      conditions: healthy.conditions.map((c) => (c.type === "Stalled" ? { ...c, status: "True" as const, reason: "InvalidDefinition" } : c)),
    };
    await writeFile(join(other.clustersDir, `${healthy.cluster}.status.json`), JSON.stringify(stalled));
    expect((await runShardctl(other, ["status", healthy.cluster])).stdout).toContain(
      `(definition commit ${"b".repeat(12)}, invalid: the revision is the last valid one's`,
    );
    // Invalid from its first version: no revision yet, said "-" as the dashboard says it.
    await writeFile(join(other.clustersDir, `${healthy.cluster}.status.json`), JSON.stringify({ ...stalled, observedRevision: "" }));
    expect((await runShardctl(other, ["status", healthy.cluster])).stdout).toMatch(new RegExp(`^${healthy.cluster} \\[cluster\\]  \\S+  revision - `, "m"));
  } finally {
    await other.close();
  }
});
