/**
 * How a launch process ended, as its wrapper recorded it on its node: an exit status, none recorded,
 * or — when the node does not answer — that it could not be read, never "ended without recording an
 * exit status", which sent operators looking for a full disk while the status file sat on a node cut
 * off by a partition. A real sshd node, stopped for the last case.
 */
import { spawn } from "node:child_process";
import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, expect, test } from "vitest";
import { askExit, type LedgerProcess } from "../../src/launch/index.js";
import { NodePool } from "../../src/nodes/index.js";
import { sshNodeConfig, startSshdNodes, type SshdSet } from "../support/sshd.js";

let sshd: SshdSet;
let pool: NodePool;

beforeAll(async () => {
  sshd = await startSshdNodes({ count: 1 });
  pool = new NodePool({ knownHostsPath: sshd.knownHostsPath, sshConfigPath: join(sshd.root, "no-config") });
}, 60_000);

afterAll(async () => {
  await pool?.close();
  await sshd?.close();
});

/** A stage whose run folder is on the sshd node (it runs as this user here: written directly). */
async function stageWithExit(name: string, status: string | undefined): Promise<LedgerProcess> {
  const runDir = join(sshd.nodes[0]!.modelDir, ".shardctl", "run", name);
  await mkdir(runDir, { recursive: true });
  const exitFile = join(runDir, "stage-0.exit");
  if (status !== undefined) await writeFile(exitFile, `${status}\n`);
  return { role: "stage", index: 0, node: "node-1", pid: 4242, startTime: "1", runDir, logFile: join(runDir, "stage-0.log"), exitFile };
}

test("a recorded status, none recorded, and a node that does not answer are three different things", async () => {
  const node = pool.get(sshNodeConfig(sshd, 0));
  expect(await askExit(node, await stageWithExit("exited", "69"))).toEqual({ words: "exited with status 69", known: true });
  expect(await askExit(node, await stageWithExit("killed", "137"))).toEqual({ words: "killed by SIGKILL (status 137)", known: true });
  const none = await askExit(node, await stageWithExit("none", undefined));
  expect(none.known).toBe(true);
  expect(none.words).toMatch(/^ended without recording an exit status/);

  const recorded = await stageWithExit("cut-off", "69");
  await sshd.nodes[0]!.stop();
  try {
    // A connection made now (the pool's own would outlive the server: sshd's session process does).
    const fresh = new NodePool({ knownHostsPath: sshd.knownHostsPath, sshConfigPath: join(sshd.root, "no-config") });
    const unread = await askExit(fresh.get(sshNodeConfig(sshd, 0)), recorded).finally(() => fresh.close());
    expect(unread, JSON.stringify(unread)).toMatchObject({ known: false });
    expect(unread.words).toMatch(/^its exit status could not be read \(.*node-1/);
    expect(unread.words).not.toContain("ended without recording");
  } finally {
    await sshd.nodes[0]!.start();
  }
});

// Regression: a teardown whose signal timed out on a loaded node left the process running, and the
// evidence said it "ended without recording an exit status (… or its disk was full)".
test("a process without a recorded status that still runs is said to be still running, not to have ended", async () => {
  const node = pool.get(sshNodeConfig(sshd, 0));
  const sleeper = spawn("sleep", ["30"], { stdio: "ignore" });
  try {
    const startTime = await node.processStartTime(sleeper.pid!);
    const running = { ...(await stageWithExit("running", undefined)), pid: sleeper.pid!, startTime: startTime! };
    expect(await askExit(node, running)).toEqual({
      words: "was still running when asked how it ended (a teardown that could not confirm its stop: the next pass stops it)",
      known: false,
    });
  } finally {
    sleeper.kill("SIGKILL");
  }
});
