/**
 * A status file that exists but cannot be read (garbage, JSON that is no status, a FIFO): `status`
 * names it and why instead of "no status file yet"; `wait` keeps waiting (the daemon rewrites it)
 * and its timeout says why the file could not be read.
 */
import { execFileSync, spawn } from "node:child_process";
import { rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, expect, test } from "vitest";
import type { Daemon } from "../../src/reconciler/index.js";
import {
  conditionOf,
  definitionText,
  revisionOf,
  runShardctl,
  shardctlJs,
  startInProcessDaemon,
  startWorld,
  waitForStatus,
  writeDefinition,
  type DaemonWorld,
} from "../reconciler/daemon-fixture.js";

let world: DaemonWorld;
let daemon: Daemon | undefined;
let statusFile: string;
const rewrites =
  "A running daemon puts its own back within moments, or at its next pass of the cluster (`shardctl reconcile <name>` asks for one now); with no daemon, delete it";

beforeAll(async () => {
  world = await startWorld();
  // The files written here are not statuses on purpose, and the audit's plain read would block on the FIFO.
  world.audit.close();
  await writeDefinition(world, "tiny", definitionText(world, { nodes: ["l1", "l2"] }));
  statusFile = join(world.clustersDir, "tiny.status.json");
});
afterAll(async () => {
  await daemon?.stop();
  await world?.close();
});

test("status <name> on garbage: the file named, where it breaks (never its text: it may be a link to a secret), what to do; exit 1", async () => {
  await writeFile(statusFile, "garbage\n");
  const run = await runShardctl(world, ["status", "tiny"]);
  expect(run.code).toBe(1);
  expect(run.stdout).toMatch(
    new RegExp(
      `^tiny: ${statusFile} exists but cannot be read: not JSON \\(it does not parse\\); the daemon writes this file whole, so it was written by something else\\. `,
    ),
  );
  expect(run.stdout).not.toContain("garbage");
  await writeFile(statusFile, '{"cluster": "tiny",\n  "health" "x"}');
  const broken = await runShardctl(world, ["status", "tiny"]);
  expect(broken.stdout).toContain("not JSON (it breaks at line 2, column 12)");
  expect(run.stdout).toContain(rewrites);
  expect(run.stdout).not.toContain("no status file yet");
});

test("status (the list) marks the row and says why on stderr; --json prints no status and says why", async () => {
  const list = await runShardctl(world, ["status"]);
  expect(list.code).toBe(1);
  expect(list.stdout).toMatch(/^tiny\s+\[cluster\]\s+-\s+-\s+-\s+-\s+\(status file unreadable\)$/m);
  expect(list.stderr).toContain(`${statusFile} exists but cannot be read: not JSON`);
  const json = await runShardctl(world, ["status", "tiny", "--json"]);
  expect(json).toMatchObject({ code: 1, stdout: "null\n" });
  expect(json.stderr).toContain(`${statusFile} exists but cannot be read: not JSON`);
});

test("status on JSON that is not a status names the first field that is wrong", async () => {
  await writeFile(statusFile, `{"cluster": 7}\n`);
  const run = await runShardctl(world, ["status", "tiny"]);
  expect(run.code).toBe(1);
  expect(run.stdout).toMatch(new RegExp(`^tiny: ${statusFile} exists but cannot be read: not a status: cluster: .+ \\(and \\d+ more\\)\\. `));
});

test("status on a FIFO status file answers at once: it is not a regular file", async () => {
  await rm(statusFile, { force: true });
  execFileSync("mkfifo", [statusFile]);
  const run = await runShardctl(world, ["status", "tiny"], 15_000);
  expect(run.code).toBe(1);
  expect(run.stdout).toContain(`tiny: ${statusFile} exists but cannot be read: the status file is a FIFO (named pipe), not a regular file`);
});

test("wait: times out saying the status file was unreadable; waits through it until the daemon replaces it", { timeout: 90_000 }, async () => {
  await rm(statusFile, { force: true });
  await writeFile(statusFile, "garbage\n");
  const revision = (await revisionOf(world, "tiny")).slice(0, 12);
  const timedOut = await runShardctl(world, ["wait", "tiny", "--for", "condition=Planned", "--timeout", "1s"]);
  expect(timedOut.code).toBe(1);
  expect(timedOut.stderr).toMatch(
    new RegExp(`^timed out after 1s waiting for condition Planned at revision ${revision}: ${statusFile} exists but cannot be read: not JSON [^\\n]*\\n$`),
  );
  // No daemon runs yet: the message says nothing would have changed the file.
  expect(timedOut.stderr).toContain(`; no shardctl daemon is watching ${world.clustersDir} (start one: shardctl daemon)`);

  // A FIFO in its place now: wait keeps looking, and the daemon's first pass replaces it.
  await rm(statusFile, { force: true });
  execFileSync("mkfifo", [statusFile]);
  const waiting = spawn(
    process.execPath,
    [shardctlJs, "wait", "tiny", "--for", "condition=Planned", "--timeout", "40s", "--config", world.settingsFile, "--dir", world.clustersDir],
    {
      cwd: world.root,
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  let stdout = "";
  waiting.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
  const exited = new Promise<number | null>((done) => waiting.once("close", done));
  await new Promise((r) => setTimeout(r, 1000));
  daemon = await startInProcessDaemon(world);
  expect(await exited).toBe(0);
  expect(stdout).toContain(`tiny: condition Planned holds at revision ${revision}`);
  const status = await waitForStatus(world, "tiny", (s) => conditionOf(s, "Planned")?.status === "True", 5_000);
  expect(status.observedRevision.slice(0, 12)).toBe(revision);
});
