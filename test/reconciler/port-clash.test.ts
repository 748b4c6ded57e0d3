/**
 * Two definitions asking for the same coordinator port on the same node: the second says at once
 * that the first holds it (PortInUse naming it), without spending its restart budget on launches
 * that would fail, and launches on its own once the first moves off the port. A port another
 * program holds is retried the same way, the failed launches given back to the budget; a serving
 * cluster edited onto such a port, or onto a transport range another cluster fills, keeps serving
 * until it is free. The daemon runs in this process
 * on two local nodes.
 */
import { spawn } from "node:child_process";
import { rm } from "node:fs/promises";
import { createServer } from "node:net";
import { join } from "node:path";
import { expect, test } from "vitest";
import {
  conditionOf,
  freePort,
  freePortRange,
  isReadyAt,
  readStatusFile,
  removeDefinition,
  revisionOf,
  runShardctl,
  sleep,
  waitForStatus,
  writeSlowEngine,
} from "./daemon-fixture.js";
import { useDaemonWorld } from "./use-daemon-world.js";

const dw = useDaemonWorld({ settings: { enabled: true, restartBudget: 3 } });

test("a coordinator port another cluster holds: PortInUse naming it, no launch counted; launched once the port is free", async () => {
  const { world } = dw;
  const { port, portRange: range } = await dw.freeAddresses();
  await dw.define("first", { nodes: ["l1", "l2"], port, portRange: range });
  await waitForStatus(world, "first", (s) => isReadyAt(s), 90_000);
  await dw.define("second", { nodes: ["l1", "l2"], port, portRange: range, contextLength: 128 });
  const refused = await waitForStatus(world, "second", (s) => s.lastError?.reason === "PortInUse", 60_000);
  expect(refused.lastError?.message).toContain(`[coordinator] port ${port} on local is held by cluster "first"`);
  expect(conditionOf(refused, "Ready")?.status).toBe("False");
  expect(refused.restarts).toMatchObject({ count: 0, evidence: [] });
  expect(isReadyAt((await waitForStatus(world, "first", () => true))!)).toBe(true);
  // The first moves to another port (a new launch): the second's retries find the port free.
  await dw.define("first", { nodes: ["l1", "l2"], port: await freePort(), portRange: range });
  await waitForStatus(world, "second", (s) => isReadyAt(s), 120_000);
  await waitForStatus(world, "first", (s) => isReadyAt(s), 60_000);
}, 240_000);

test("two definitions written at once onto one coordinator port: one serves, the other is refused before it starts anything (PortInUse, not counted), never answered by the other's coordinator", async () => {
  const { world } = dw;
  const { port } = await dw.freeAddresses();
  const names = ["twin-a", "twin-b"];
  // Written together, as one commit adding both: their passes launch side by side.
  await Promise.all(names.map(async (name) => dw.define(name, { nodes: ["l1", "l2"], port, portRange: (await dw.freeAddresses()).portRange })));
  const ready = await Promise.race(names.map((name) => waitForStatus(world, name, (s) => isReadyAt(s), 120_000).then(() => name)));
  const loser = names.find((n) => n !== ready)!;
  const refused = await waitForStatus(world, loser, (s) => s.lastError?.reason === "PortInUse", 60_000);
  expect(refused.lastError?.message).toMatch(new RegExp(`port (127\\.0\\.0\\.1:)?${port} on local is held by cluster "?${ready}"?`));
  expect(refused.restarts?.count).toBe(0);
  // No version of the loser's status ever had a coordinator that answered: its launch stopped before
  // starting one, rather than probing the winner's.
  const versions = world.audit.statusesOf(loser);
  expect(versions.length).toBeGreaterThan(0);
  expect(versions.filter((v) => v.timeline.some((e) => e.step === "coordinator-healthy" || e.step === "coordinator-started"))).toEqual([]);
  expect(versions.filter((v) => v.restarts?.evidence.some((e) => e.reason !== "PortInUse"))).toEqual([]);
  expect(isReadyAt((await waitForStatus(world, ready, () => true))!)).toBe(true);
  // Removed, so the tests after this one run beside no more clusters than before.
  for (const name of names) await rm(join(world.clustersDir, `${name}.toml`));
  for (const name of names) for (let i = 0; i < 600 && (await readStatusFile(world, name)) !== undefined; i++) await sleep(100);
}, 240_000);

test("a transport range another cluster fills: PortRangeExhausted, retried without spending the budget, never Stalled; tried again as soon as the other is removed, not at the end of its back-off", async () => {
  const { world } = dw;
  // Two stages and a coordinator's control port: the first cluster takes every port of the range.
  const portRange = await freePortRange(["127.0.0.1"], 3);
  await dw.define("filler", { nodes: ["l1", "l2"], port: await freePort(), portRange });
  await waitForStatus(world, "filler", (s) => isReadyAt(s), 90_000);
  await dw.define("crowded", { nodes: ["l1", "l2"], port: await freePort(), portRange });
  const refused = await waitForStatus(world, "crowded", (s) => s.lastError?.reason === "PortRangeExhausted", 90_000);
  expect(refused.lastError?.message).toMatch(/no free port for .* held by .*cluster filler/);
  // This launch's own earlier port is named as its own, not as another holder's.
  expect(refused.lastError?.message).not.toMatch(/\(stage-\d on /);
  expect(refused.restarts?.count).toBe(0);
  expect(refused.health).not.toBe("Stalled");
  // Six failed passes (each status says its own lastError.at): the back-off before the next is 8 to 16 s.
  const failedPasses = (): number =>
    new Set(
      world.audit
        .statusesOf("crowded")
        .map((s) => s.lastError)
        .filter((e) => e?.reason === "PortRangeExhausted")
        .map((e) => e!.at),
    ).size;
  for (let i = 0; i < 600 && failedPasses() < 6; i++) await sleep(50);
  expect(failedPasses()).toBeGreaterThanOrEqual(6);
  // Refused before anything of a launch: nothing staged or started, and no status said it launched.
  const versions = world.audit.statusesOf("crowded");
  expect(versions.filter((v) => conditionOf(v, "Ready")?.reason === "Launching" || v.timeline.length > 0 || v.restarts?.evidence.length)).toEqual([]);
  await rm(join(world.clustersDir, "filler.toml"));
  for (let i = 0; i < 600 && (await readStatusFile(world, "filler")) !== undefined; i++) await sleep(50);
  const goneAt = Date.now();
  const ready = await waitForStatus(world, "crowded", (s) => isReadyAt(s), 60_000);
  const pass = ready.history.findLast((h) => h.result === "success")!;
  // Its back-off would have put the pass at least 8 s after the last failed one ended (six or more
  // failures: a delay drawn from [8, 16) s or longer); it began before, once the other was gone.
  const lastFailed = ready.history.findLast((h) => h.result === "failed" && Date.parse(h.at) < Date.parse(pass.at))!;
  expect(Date.parse(pass.at)).toBeGreaterThanOrEqual(goneAt - 1_000);
  expect(Date.parse(pass.at) - (Date.parse(lastFailed.at) + lastFailed.durationMs)).toBeLessThan(8_000);
  await rm(join(world.clustersDir, "crowded.toml"));
  for (let i = 0; i < 600 && (await readStatusFile(world, "crowded")) !== undefined; i++) await sleep(100);
}, 240_000);

test("a serving cluster edited onto a transport range another cluster fills keeps serving, says so, and moves once the other is removed", async () => {
  const { world } = dw;
  // Two stages and a coordinator's control port: the holder takes every port of the range.
  const portRange = await freePortRange(["127.0.0.1"], 3);
  await dw.define("holder", { nodes: ["l1", "l2"], port: await freePort(), portRange });
  await waitForStatus(world, "holder", (s) => isReadyAt(s), 90_000);
  const port = await freePort();
  const serving = await dw.waitServing("mover", await dw.define("mover", { nodes: ["l1", "l2"], port }), 90_000);
  const edited = await dw.define("mover", { nodes: ["l1", "l2"], port, portRange });
  const refused = await waitForStatus(world, "mover", (s) => s.lastError?.reason === "PortRangeExhausted", 60_000);
  // What served before the edit serves on: the same processes, Ready, nothing torn down for a launch that could not run.
  expect(conditionOf(refused, "Ready")?.status).toBe("True");
  expect(refused.stages.map((s) => s.pid)).toEqual(serving.stages.map((s) => s.pid));
  expect(refused.lastError?.message).toMatch(/no free port for .* held by .*cluster holder.*; the running revision keeps serving meanwhile/);
  const answer = await fetch(`${refused.coordinator!.url}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ prompt: "hello", max_tokens: 2 }),
  });
  expect(answer.status).toBe(200);
  await rm(join(world.clustersDir, "holder.toml"));
  const moved = await dw.waitServing("mover", edited, 60_000);
  expect(moved.stages.map((s) => s.pid)).not.toEqual(serving.stages.map((s) => s.pid));
  await removeDefinition(world, "mover", 60_000);
}, 240_000);

test("a coordinator port another program holds: PortInUse naming it, retried without spending the budget; launched once the port is free", async () => {
  const { world } = dw;
  const port = await freePort();
  const holder = createServer();
  await new Promise<void>((resolve) => holder.listen(port, "127.0.0.1", resolve));
  try {
    // An engine that takes 2 s to start, so the launch after the port is freed can be watched.
    const binary = await writeSlowEngine(world, 2);
    await dw.define("third", { nodes: ["l1", "l2"], port, portRange: await freePortRange(["127.0.0.1"], 8), binary });
    // Two launches failed on the port: neither counted, none stalled the cluster.
    const refused = await waitForStatus(world, "third", (s) => (s.restarts?.evidence.filter((e) => e.reason === "PortInUse").length ?? 0) >= 2, 90_000);
    expect(refused.lastError?.message).toContain(`127.0.0.1:${port} is already in use on local`);
    expect(refused.restarts?.count).toBe(0);
    expect(refused.health).not.toBe("Stalled");
    // Found as the ports are chosen, before any process starts: not counted even for a moment, in
    // any version of the status written so far (a retry counted as it began would say 1).
    const versions = world.audit.statusesOf("third");
    expect(versions.some((s) => conditionOf(s, "Ready")?.reason === "Launching")).toBe(true);
    expect(versions.map((s) => s.restarts?.count ?? 0)).toEqual(versions.map(() => 0));
  } finally {
    await new Promise((resolve) => holder.close(resolve));
  }
  // The launch that finds the port free says, while it runs, which failure it tries again after.
  const retrying = await waitForStatus(world, "third", (s) => conditionOf(s, "Ready")?.reason === "Launching", 90_000);
  expect(conditionOf(retrying, "Ready")?.message).toMatch(
    new RegExp(`^nothing serves this revision yet: [^(]+ \\(again, after PortInUse: .*127\\.0\\.0\\.1:${port} is already in use`),
  );
  const ready = await waitForStatus(world, "third", (s) => isReadyAt(s), 120_000);
  expect(ready.restarts?.count).toBe(1);
}, 240_000);

test("a serving cluster edited onto a port another program holds keeps serving, says so, and moves once the port is free", async () => {
  const { world } = dw;
  const { port, portRange: range } = await dw.freeAddresses();
  await dw.define("fourth", { nodes: ["l1", "l2"], port, portRange: range });
  const serving = await waitForStatus(world, "fourth", (s) => isReadyAt(s), 90_000);
  const pids = serving.stages.map((s) => s.pid);
  const taken = await freePort();
  const holder = createServer();
  await new Promise<void>((resolve) => holder.listen(taken, "127.0.0.1", resolve));
  try {
    await dw.define("fourth", { nodes: ["l1", "l2"], port: taken, portRange: range });
    const refused = await waitForStatus(world, "fourth", (s) => s.lastError?.reason === "PortInUse", 60_000);
    expect(refused.lastError?.message).toContain(`[coordinator] port ${taken} on local is held by a program that is not a cluster of this daemon`);
    expect(refused.lastError?.message).toContain(`listener on 127.0.0.1:${taken}`);
    // Nothing was torn down for it: the revision that runs still serves, with the same processes.
    expect(conditionOf(refused, "Ready")?.status).toBe("True");
    expect(refused.stages.map((s) => s.pid)).toEqual(pids);
    expect(refused.restarts?.count ?? 0).toBe(0);
    // `shardctl status` heads with the new revision, and says which revision each condition is
    // about: Ready is the running one's, not the refused one's.
    const detail = (await runShardctl(world, ["status", "fourth"])).stdout;
    const header = new RegExp(`revision ${refused.observedRevision.slice(0, 12)}`);
    expect(detail).toMatch(header);
    const ready = conditionOf(refused, "Ready")!;
    expect(ready.observedRevision).not.toBe(refused.observedRevision);
    expect(detail).toMatch(/^CONDITION\s+STATUS\s+REASON\s+REVISION\s+MESSAGE$/m);
    expect(detail).toMatch(new RegExp(`^Ready\\s+True\\s+ClusterReady\\s+${ready.observedRevision.slice(0, 12)}\\s+serving at`, "m"));
  } finally {
    await new Promise((resolve) => holder.close(resolve));
  }
  const revision = await revisionOf(world, "fourth");
  const moved = await waitForStatus(world, "fourth", (s) => isReadyAt(s, revision), 120_000);
  expect(moved.coordinator?.url).toContain(`:${taken}`);
  expect(moved.stages.map((s) => s.pid)).not.toEqual(pids);
}, 240_000);

test("a transport port held by an outgoing connection (its local port, picked by the kernel in the range) is skipped: the cluster launches on the next, at once", async () => {
  const { world } = dw;
  const range = await freePortRange(["127.0.0.1"], 8);
  const [first] = range.split("-").map(Number) as [number, number];
  // A connection out of the range's first port, made as a kernel-picked one is (no SO_REUSEADDR,
  // which Node sets on every socket it binds: Python's plain socket): nothing listens there, so
  // connecting finds it free, but a listener cannot bind it. Regression: every launch chose it and
  // failed (PortInUse, for ever).
  const peer = createServer();
  await new Promise<void>((resolve) => peer.listen(0, "127.0.0.1", resolve));
  const peerPort = (peer.address() as { port: number }).port;
  const script = `import socket, sys, time\ns = socket.socket()\ns.bind(("127.0.0.1", ${first}))\ns.connect(("127.0.0.1", ${peerPort}))\nprint("connected", flush=True)\nsys.stdin.read()\n`;
  const outgoing = spawn("python3", ["-c", script], { stdio: ["pipe", "pipe", "inherit"] });
  await new Promise<void>((resolve, reject) => {
    outgoing.stdout!.once("data", () => resolve());
    outgoing.once("exit", (code) => reject(new Error(`python3 exited ${code} before connecting`)));
    outgoing.once("error", reject);
  });
  try {
    const revision = await dw.define("outgoing", { nodes: ["l1", "l2"], portRange: range, port: await freePort() });
    const ready = await dw.waitServing("outgoing", revision, 90_000);
    expect(ready.restarts?.evidence ?? []).toEqual([]);
    expect(ready.stages.map((s) => s.address)).not.toContain(`127.0.0.1:${first}`);
    expect(await removeDefinition(world, "outgoing")).toBe(true);
  } finally {
    outgoing.kill();
    await new Promise((resolve) => peer.close(resolve));
  }
}, 180_000);
