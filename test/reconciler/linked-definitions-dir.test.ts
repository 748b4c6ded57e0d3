/**
 * A definitions directory reached through a symbolic link. One directory under two names is one
 * daemon's: what a daemon started on its real path launched, one started on a link to it adopts (it
 * was ClusterOwnedElsewhere), and records it under the link's name, so the link switched to a copy
 * leads the next daemon to it. A cluster whose folder was moved away is taken over by the daemon of
 * the folder that defines it now. A `current` link a deployment swaps to a new release moves the
 * directory under a running `shardctl daemon`: it starts again on the new target (its lock, file
 * watch and status files there) and adopts what runs, untouched. Two local nodes; the first test's
 * daemons run in this process, the second's is a real process.
 */
import { execFile, spawn } from "node:child_process";
import { promisify } from "node:util";
import { cp, mkdir, rename, rm, symlink, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { expect, test } from "vitest";
import { readStatus, type ClusterStatus } from "../../src/reconciler/index.js";
import { pathExists } from "../../src/files/index.js";
import { definitionText, fastMonitor, shardctlJs, sleep, startInProcessDaemon, writeSettings } from "./daemon-fixture.js";
import { isServingAt, useDaemonWorld } from "./use-daemon-world.js";

const run = promisify(execFile);
const dw = useDaemonWorld({ settings: { enabled: true }, daemon: "none" });

async function waitFor<T>(what: string, look: () => Promise<T | undefined>, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const found = await look();
    if (found !== undefined) return found;
    if (Date.now() > deadline) throw new Error(`not within ${timeoutMs} ms: ${what}`);
    await sleep(100);
  }
}

const servingIn = (dir: string, name: string, revision: string): Promise<ClusterStatus | undefined> =>
  readStatus(join(dir, `${name}.status.json`))
    .catch(() => undefined)
    .then((s) => (s !== undefined && isServingAt(s, revision) ? s : undefined));

test("a daemon started on a link to the directory adopts what a daemon of its real path launched", async () => {
  const { world } = dw;
  const revision = await dw.define("named", { nodes: ["l1", "l2"] });
  const first = await dw.startDaemon();
  const serving = await dw.waitServing("named", revision);
  await first.stop();
  const alias = join(world.root, "alias");
  await symlink(world.clustersDir, alias);
  const second = await startInProcessDaemon(world, 60_000, fastMonitor, {}, { dir: alias, logName: "daemon-alias.log" });
  try {
    // Its first pass over the cluster, written (the file said Healthy already: the first daemon's word).
    await second.whenIdle();
    const adopted = await waitFor("adopted through the link", async () => {
      const s = await servingIn(world.clustersDir, "named", revision);
      return s !== undefined && s.health === "Healthy" ? s : undefined;
    });
    expect(adopted.stages.map((c) => c.pid)).toEqual(serving.stages.map((c) => c.pid));
    expect(adopted.conditions.some((c) => c.reason === "ClusterOwnedElsewhere")).toBe(false);
  } finally {
    await second.stop();
  }
  // Adopted through the link, it is recorded under the link's name: the link switched to a copy of
  // the folder (a new release) leads the next daemon to it, which adopts it again.
  const release = join(world.root, "release-copy");
  await mkdir(release);
  await cp(join(world.clustersDir, "named.toml"), join(release, "named.toml"));
  await symlink(release, `${alias}.new`);
  await rename(`${alias}.new`, alias);
  const third = await startInProcessDaemon(world, 60_000, fastMonitor, {}, { dir: alias, logName: "daemon-release.log" });
  try {
    const adopted = await waitFor("adopted from the new release", async () => {
      const s = await servingIn(release, "named", revision);
      return s !== undefined && s.health === "Healthy" ? s : undefined;
    });
    expect(adopted.stages.map((c) => c.pid)).toEqual(serving.stages.map((c) => c.pid));
    await rm(join(release, "named.toml"));
    await waitFor("pruned", async () => ((await pathExists(join(release, "named.status.json"))) ? undefined : true));
  } finally {
    await third.stop();
    await rm(alias);
    await rm(join(world.clustersDir, "named.toml"), { force: true });
  }
}, 150_000);

test("a copy of the folder beside the one a cluster was launched from says what to do; once that folder is gone, the copy's daemon takes the cluster over", async () => {
  const { world } = dw;
  const revision = await dw.define("moved", { nodes: ["l1", "l2"] });
  const first = await dw.startDaemon();
  const serving = await dw.waitServing("moved", revision);
  await first.stop();
  const copy = join(world.root, "checkout-copy");
  await mkdir(copy);
  await cp(join(world.clustersDir, "moved.toml"), join(copy, "moved.toml"));
  const movedAway = join(world.root, "checkout-moved");
  // A short resync: the stalled pass is looked at again soon after the old folder goes.
  const daemon = await startInProcessDaemon(world, 2_000, fastMonitor, {}, { dir: copy, logName: "daemon-copy.log" });
  try {
    const stalled = await waitFor("stalled beside the old folder", async () => {
      const s = await readStatus(join(copy, "moved.status.json")).catch(() => undefined);
      return s?.conditions.find((c) => c.reason === "ClusterOwnedElsewhere");
    });
    expect(stalled.message).toBe(
      `a cluster named "moved" runs from ${world.clustersDir}, launched by a daemon with the same state_dir, and no daemon watches that folder now: if this folder replaces it (a copy, a checkout moved), remove or rename ${world.clustersDir} and this daemon takes the cluster over at its next pass (shardctl reconcile moved); otherwise rename this one`,
    );
    await rename(world.clustersDir, movedAway);
    const adopted = await waitFor("taken over once the old folder is gone", async () => {
      const s = await servingIn(copy, "moved", revision);
      return s !== undefined && s.health === "Healthy" ? s : undefined;
    });
    expect(adopted.stages.map((c) => c.pid)).toEqual(serving.stages.map((c) => c.pid));
    await rm(join(copy, "moved.toml"));
    await waitFor("pruned", async () => ((await pathExists(join(copy, "moved.status.json"))) ? undefined : true));
  } finally {
    await daemon.stop();
    if (await pathExists(movedAway)) await rename(movedAway, world.clustersDir);
    await rm(join(world.clustersDir, "moved.toml"), { force: true });
  }
}, 150_000);

test("a swapped `current` link: the running daemon starts again on the new release, its lock there, and adopts what runs", async () => {
  const { world } = dw;
  // A heartbeat of 5 s (the default): the swap's own file events come well before the periodic look.
  await writeSettings(world, { enabled: true, heartbeatSeconds: 5 });
  const revision = await dw.define("swapped", { nodes: ["l1", "l2"] });
  const release2 = join(world.root, "release-2");
  await mkdir(release2);
  await cp(join(world.clustersDir, "swapped.toml"), join(release2, "swapped.toml"));
  // The new release adds a cluster.
  await writeFile(join(release2, "added.toml"), definitionText(world, { nodes: ["l1", "l2"], ...(await dw.freeAddresses()) }));
  const current = join(world.root, "current");
  await symlink(world.clustersDir, current);
  const daemon = spawn(process.execPath, [shardctlJs, "daemon", "--config", world.settingsFile, "--dir", current], {
    cwd: world.root,
    stdio: ["ignore", "ignore", "pipe"],
    env: { ...process.env, SHARDCTL_LOG_LEVEL: "debug" },
  });
  let stderr = "";
  daemon.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<number | null>((done) => daemon.once("exit", (code) => done(code)));
  try {
    const serving = await waitFor("serving from the first release", () => servingIn(world.clustersDir, "swapped", revision), 60_000);
    // The deployment's swap: a new link renamed over the old one.
    await symlink(release2, `${current}.new`);
    await rename(`${current}.new`, current);
    const adopted = await waitFor("serving from the second release", () => servingIn(release2, "swapped", revision), 30_000);
    await waitFor(
      "the added cluster serving",
      async () => ((await readStatus(join(release2, "added.status.json")).catch(() => undefined))?.health === "Healthy" ? true : undefined),
      60_000,
    );
    // The swap's file events were left to the daemon that starts again on the new target: nothing
    // was begun through the link and then cut off by the restart. Regression: the added cluster's
    // launch began at once and was called off (DaemonStopping) when the periodic look came.
    expect(stderr).not.toMatch(/"cluster":"added"[^\n]*DaemonStopping/);
    expect(stderr).toContain(`the definitions directory ${current} leads to ${release2} now`);
    expect(adopted.stages.map((c) => c.pid)).toEqual(serving.stages.map((c) => c.pid));
    expect(await pathExists(join(release2, ".shardctl-daemon.lock"))).toBe(true);
    expect(await pathExists(join(world.clustersDir, ".shardctl-daemon.lock"))).toBe(false);
    expect(daemon.exitCode).toBeNull();
    // Every command looks where the link leads now, and finds the daemon there.
    const status = await run(process.execPath, [shardctlJs, "status", "swapped", "--config", world.settingsFile, "--dir", current]);
    expect(status.stderr).not.toMatch(/no shardctl daemon/);
    expect(status.stdout).toMatch(/Healthy/);
    // One at a time: both definitions gone at once is the mass-prune guard's to refuse.
    await rm(join(release2, "added.toml"));
    await waitFor("pruned", async () => ((await pathExists(join(release2, "added.status.json"))) ? undefined : true));
    await rm(join(release2, "swapped.toml"));
    await waitFor("pruned", async () => ((await pathExists(join(release2, "swapped.status.json"))) ? undefined : true));
    daemon.kill("SIGTERM");
    expect(await exited).toBe(0);
  } finally {
    daemon.kill("SIGKILL");
    await rm(join(world.clustersDir, "swapped.toml"), { force: true });
    await writeSettings(world, { enabled: true });
  }
}, 150_000);
