/**
 * The daemon signals the pids a ledger entry names and removes the run folders it names,
 * recursively, as its own user. An entry whose folders are not run folders of its cluster (a
 * ledger folder others could write once got an entry naming /tmp, and the prune emptied it) is
 * refused as unreadable, never acted on: nothing is launched or torn down for it on a guess.
 */
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, test } from "vitest";
import { Ledger, type LedgerEntry } from "../../src/launch/index.js";

let stateDir: string;
beforeAll(async () => {
  stateDir = await mkdtemp(join(tmpdir(), "shardctl-ledger-trust-"));
  await mkdir(join(stateDir, "ledger"));
});
afterAll(async () => {
  if (stateDir !== undefined) await rm(stateDir, { recursive: true, force: true });
});

const process = (runDir: string) => ({
  role: "stage",
  index: 0,
  node: "n1",
  pid: 4242,
  startTime: "linux:1",
  runDir,
  logFile: `${runDir}/stage-0.log`,
  exitFile: `${runDir}/stage-0.exit`,
});
const entry = (cluster: string, processes: unknown[]) => ({
  cluster,
  revision: "a".repeat(64),
  phase: "running",
  startedAt: "2026-12-06T10:00:00.000Z",
  processes,
  ports: [],
});

test.each([
  ["/tmp", /runDir "\/tmp" is not a run folder of this cluster/],
  ["/home/ops/models/.shardctl/run/other", /is not a run folder of this cluster/],
  ["/home/ops/models/.shardctl/run/evil/../../..", /is not a run folder of this cluster/],
  ["relative/run/evil", /is not a run folder of this cluster/],
])("an entry whose runDir is %s is refused, naming why", async (runDir, why) => {
  await writeFile(join(stateDir, "ledger", "evil.json"), JSON.stringify(entry("evil", [process(runDir)])));
  const ledger = new Ledger(stateDir);
  const read = await ledger.read("evil").catch((e: unknown) => e as { reason?: string; message: string; terminal?: boolean });
  expect(read).toMatchObject({ reason: "LedgerEntryUnreadable", terminal: true });
  expect((read as Error).message).toMatch(why);
  expect((await ledger.list()).map((e) => e.cluster)).not.toContain("evil");
});

test("log and exit files outside the run folder are refused", async () => {
  const runDir = "/home/ops/models/.shardctl/run/evil";
  await writeFile(join(stateDir, "ledger", "evil.json"), JSON.stringify(entry("evil", [{ ...process(runDir), exitFile: "/etc/passwd" }])));
  const read = await new Ledger(stateDir).read("evil").catch((e: unknown) => e as Error);
  expect((read as Error).message).toMatch(/process 0's exitFile is not a file of its runDir/);
});

test("run folders of the cluster on a node and on the control machine are read as written", async () => {
  const written = entry("good", [
    process("/home/ops/models/.shardctl/run/good"),
    { ...process("/var/lib/shardctl/state/run/good"), role: "coordinator", index: undefined },
  ]);
  await writeFile(join(stateDir, "ledger", "good.json"), JSON.stringify(written));
  const read = (await new Ledger(stateDir).read("good")) as LedgerEntry;
  expect(read.processes.map((p) => p.runDir)).toEqual(["/home/ops/models/.shardctl/run/good", "/var/lib/shardctl/state/run/good"]);
});
