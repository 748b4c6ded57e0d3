/**
 * A definitions directory reached through a symbolic link. One directory under two names is one
 * daemon's: what a daemon started on its real path launched, one started on a link to it adopts (it
 * was ClusterOwnedElsewhere). A `current` link a deployment swaps to a new release moves the
 * directory under a running `shardctl daemon`: it starts again on the new target (its lock, file
 * watch and status files there) and adopts what runs, untouched. Two local nodes; the first test's
 * daemons run in this process, the second's is a real process.
 */
import { execFile, spawn } from "node:child_process";
import { promisify } from "node:util";
import { cp, mkdir, rename, rm, symlink } from "node:fs/promises";
import { join } from "node:path";
import { expect, test } from "vitest";
import { readStatus, type ClusterStatus } from "../../src/reconciler/index.js";
import { pathExists } from "../../src/files/index.js";
import { fastMonitor, shardctlJs, sleep, startInProcessDaemon, writeSettings } from "./daemon-fixture.js";
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
    await rm(join(world.clustersDir, "named.toml"));
    await waitFor("pruned", async () => ((await pathExists(join(world.clustersDir, "named.status.json"))) ? undefined : true));
  } finally {
    await second.stop();
    await rm(alias);
  }
}, 120_000);

test("a swapped `current` link: the running daemon starts again on the new release, its lock there, and adopts what runs", async () => {
  const { world } = dw;
  await writeSettings(world, { enabled: true, heartbeatSeconds: 1 });
  const revision = await dw.define("swapped", { nodes: ["l1", "l2"] });
  const release2 = join(world.root, "release-2");
  await mkdir(release2);
  await cp(join(world.clustersDir, "swapped.toml"), join(release2, "swapped.toml"));
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
    expect(stderr).toContain(`the definitions directory ${current} leads to ${release2} now`);
    expect(adopted.stages.map((c) => c.pid)).toEqual(serving.stages.map((c) => c.pid));
    expect(await pathExists(join(release2, ".shardctl-daemon.lock"))).toBe(true);
    expect(await pathExists(join(world.clustersDir, ".shardctl-daemon.lock"))).toBe(false);
    expect(daemon.exitCode).toBeNull();
    // Every command looks where the link leads now, and finds the daemon there.
    const status = await run(process.execPath, [shardctlJs, "status", "swapped", "--config", world.settingsFile, "--dir", current]);
    expect(status.stderr).not.toMatch(/no shardctl daemon/);
    expect(status.stdout).toMatch(/Healthy/);
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
