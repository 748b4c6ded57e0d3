/**
 * The daemon signals the pids a ledger entry names, reads its files into the status file and removes
 * its run folders, recursively, as its own user. An entry whose folder is not an absolute path or
 * whose files lie outside it is refused as unreadable; and a prune removes a folder only when it is
 * a run folder of the cluster by its form (…/run/<name>): a ledger entry naming /tmp once had the
 * prune of its made-up cluster empty it. A real daemon in this process prunes such an entry and
 * leaves the folder it names.
 */
import { spawnSync } from "node:child_process";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, test } from "vitest";
import { Ledger, type LedgerEntry } from "../../src/launch/index.js";
import { plannedProcess } from "../../src/launch/processes.js";
import { dropReconcileRequest } from "../../src/reconciler/reconcile-request.js";
import { useDaemonWorld } from "../reconciler/use-daemon-world.js";

const dw = useDaemonWorld({ settings: { enabled: true } });

let victim: string;
beforeAll(async () => {
  victim = await mkdtemp(join(tmpdir(), "shardctl-ledger-victim-"));
  await writeFile(join(victim, "keep-me"), "an operator's file\n");
});
afterAll(async () => {
  if (victim !== undefined) await rm(victim, { recursive: true, force: true });
});

const process = (runDir: string) => ({
  role: "stage",
  index: 0,
  node: "l1",
  pid: spawnSync("true").pid,
  startTime: "linux:1",
  runDir,
  logFile: `${runDir}/stage-0.log`,
  exitFile: `${runDir}/stage-0.exit`,
});
const entry = (cluster: string, processes: unknown[], owner?: string) => ({
  cluster,
  revision: "a".repeat(64),
  phase: "running",
  startedAt: "2026-12-06T10:00:00.000Z",
  processes,
  ports: [],
  ...(owner === undefined ? {} : { owner }),
});

async function ledgerFile(name: string, text: unknown): Promise<Ledger> {
  await mkdir(join(dw.world.stateDir, "ledger"), { recursive: true });
  await writeFile(join(dw.world.stateDir, "ledger", `${name}.json`), JSON.stringify(text));
  return new Ledger(dw.world.stateDir);
}

test.each([
  ["relative/run/odd", /runDir "relative\/run\/odd" is not an absolute, normal path/],
  ["/srv/models/.shardctl/run/odd/../../..", /is not an absolute, normal path/],
])("an entry whose runDir is %s is refused, naming why", async (runDir, why) => {
  const ledger = await ledgerFile("odd", entry("odd", [process(runDir)]));
  const read = await ledger.read("odd").catch((e: unknown) => e as { reason?: string; message: string; terminal?: boolean });
  expect(read).toMatchObject({ reason: "LedgerEntryUnreadable", terminal: true });
  expect((read as Error).message).toMatch(why);
  expect((await ledger.list()).map((e) => e.cluster)).not.toContain("odd");
  await rm(join(dw.world.stateDir, "ledger", "odd.json"));
});

test("log and exit files outside the run folder are refused (they would be read into the status file)", async () => {
  const runDir = "/srv/models/.shardctl/run/odd";
  const ledger = await ledgerFile("odd", entry("odd", [{ ...process(runDir), logFile: "/etc/shadow" }]));
  const read = await ledger.read("odd").catch((e: unknown) => e as Error);
  expect((read as Error).message).toMatch(/process 0's logFile is not a file of its runDir/);
  await rm(join(dw.world.stateDir, "ledger", "odd.json"));
});

test("an entry of no definition whose folder is not a run folder is pruned, and the folder it names is left", async () => {
  const ledger = await ledgerFile("evil", entry("evil", [process(victim)], dw.world.clustersDir));
  expect(((await ledger.read("evil")) as LedgerEntry).processes[0]!.runDir).toBe(victim);
  // A pass over it now (a resync would come too).
  await dropReconcileRequest(dw.world.stateDir, "evil");
  const deadline = Date.now() + 30_000;
  while ((await ledger.read("evil")) !== undefined && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200));
  expect(await ledger.read("evil")).toBeUndefined();
  expect(await readFile(join(victim, "keep-me"), "utf8")).toBe("an operator's file\n");
}, 60_000);

test("a process about to start (pid 0, no start time, as a launch records it before the start) is read as written", async () => {
  const planned = plannedProcess("stage", 0, "l1", "/srv/models/.shardctl/run/planned");
  const ledger = await ledgerFile("planned", entry("planned", [planned]));
  expect(((await ledger.read("planned")) as LedgerEntry).processes[0]).toMatchObject({ pid: 0, startTime: "" });
  expect((await ledger.list()).map((e) => e.cluster)).toContain("planned");
  await rm(join(dw.world.stateDir, "ledger", "planned.json"));
});
