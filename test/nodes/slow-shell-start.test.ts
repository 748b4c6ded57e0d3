/**
 * A node whose shell start-up hangs (a pyenv or conda init in ~/.bashrc waiting for a lock, a home
 * on a stalled network mount) is asked no more than the connection's slots allow. Regression: each
 * question given up on before the shell printed its pid closed its channel and freed its slot
 * while the shell still ran on the node, so a liveness probe a second left one more session there
 * every second; a newcomer's two nodes reached 224 such sessions and a load of 300, and staging
 * failed. A real sshd whose sessions run a start-up file (BASH_ENV) that waits while a flag exists.
 * `shardctl nodes` says how long a command takes there, and warns when it is slow.
 */
import { mkdir, readdir, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { askPortListener, type NodePool } from "../../src/nodes/index.js";
import { startSlowShellNode, type SlowShellNode } from "../support/slow-shell-node.js";
import { sshNodeConfig, sshNodeSettings, type SshdSet } from "../support/sshd.js";
import { requireBuild, shardctl } from "../cli/support/run-shardctl.js";

let slowShell: SlowShellNode;
let dir: string;
let sshd: SshdSet;
let pool: NodePool;

beforeAll(async () => {
  requireBuild();
  // The start-up file: each session marks itself, waits while the flag exists, and unmarks.
  slowShell = await startSlowShellNode(
    "slow-shell",
    (home, wait) => `: > ${home}/starting/$$\nwhile [ -e ${home}/slow ]; do ${wait} 0.1; done\n[ -e ${home}/sluggish ] && ${wait} 0.4\nrm -f ${home}/starting/$$\n`,
  );
  ({ dir, sshd, pool } = slowShell);
  await mkdir(join(dir, "starting"));
}, 60_000);

afterAll(async () => {
  await slowShell?.close();
});

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

it("questions to a node whose shell does not start time out on time, leave at most a connection's slots of sessions there, and the node answers once its shell starts again", async () => {
  const node = pool.get(sshNodeConfig(sshd, 0));
  expect((await node.run(["true"], { deadlineMs: 10_000 })).exitCode).toBe(0);
  await writeFile(join(dir, "slow"), "");
  // A liveness loop's pace: a question every 200 ms, each with a 500 ms deadline, for 6 s.
  const answers: Array<Promise<{ timedOut: boolean; ms: number }>> = [];
  for (let i = 0; i < 30; i++) {
    const asked = performance.now();
    answers.push(node.run(["true"], { deadlineMs: 500 }).then((r) => ({ timedOut: r.timedOut === true, ms: performance.now() - asked })));
    await sleep(200);
  }
  const results = await Promise.all(answers);
  expect(results.every((r) => r.timedOut)).toBe(true);
  // Each on time: the deadline, not the node, decides when the caller hears.
  expect(Math.max(...results.map((r) => r.ms))).toBeLessThan(2_000);
  // Sessions still starting on the node: no more than the connection's 8 channel slots (there were 30).
  const starting = (await readdir(join(dir, "starting"))).length;
  expect(starting).toBeGreaterThan(0);
  expect(starting).toBeLessThanOrEqual(8);

  // The shell starts again: the sessions held are killed as their pids come, and the node answers.
  await rm(join(dir, "slow"));
  const back = performance.now();
  let answered = false;
  while (!answered && performance.now() - back < 10_000) answered = (await node.run(["true"], { deadlineMs: 1_000 })).exitCode === 0;
  expect(answered).toBe(true);
  await sleep(500);
  expect(await readdir(join(dir, "starting"))).toEqual([]);
}, 60_000);

it("`shardctl nodes` gives each node's command round trip and warns of a slow one, naming the likely cause", async () => {
  const settings = join(dir, "shardctl.toml");
  await writeFile(settings, sshNodeSettings(sshd, 0));
  const quick = await shardctl(["nodes", "--json", "--config", settings], { cwd: dir });
  expect(quick.code, quick.stderr).toBe(0);
  const [row] = JSON.parse(quick.stdout) as Array<{ commandMs: number }>;
  // Measured (its size here depends on the machine's load; the sluggish start-up below is what is judged).
  expect(Number.isInteger(row!.commandMs) && row!.commandMs >= 0).toBe(true);
  // Every session's shell start-up takes 400 ms.
  await writeFile(join(dir, "sluggish"), "");
  try {
    const slow = await shardctl(["nodes", "--config", settings], { cwd: dir });
    expect(slow.code, slow.stderr).toBe(0);
    // Who holds a port, asked of such a node within less than its start-up: said as unanswered, not as "nobody".
    expect(await askPortListener(pool.get(sshNodeConfig(sshd, 0)), 1, { deadlineMs: 200 })).toEqual({ unanswered: "no answer within 200 ms" });
    expect(slow.stdout).toMatch(
      /^n1 .* each command takes \d{3,} ms to answer \(liveness probes allow 1000 ms, then 5000 ms once\): its shell start-up files, or a long round trip to it \(a command takes about 3\)\? see troubleshooting, "Slow commands on a node"$/m,
    );
  } finally {
    await rm(join(dir, "sluggish"), { force: true });
  }
}, 60_000);
