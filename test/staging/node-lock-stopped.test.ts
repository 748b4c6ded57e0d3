/**
 * A staging stopped while a node is slow to start the command that takes a file's lock (a loaded
 * node, a shell start-up file that waits): the caller hears at once, the command still makes the
 * lock once the node's shell starts, and the lock is given back after it has answered. A process
 * about to exit waits for that (`shardctl stage` stopped by Ctrl-C). Regression: the stop killed
 * the command and released the lock at once and a second later; a node that made the lock after
 * both had looked kept it until another staging took it over as stale, two minutes later.
 *
 * A real sshd whose sessions run a start-up file (BASH_ENV) that holds only the lock-taking
 * command (the one that runs `mkdir`) while a flag exists.
 */
import { rm, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import type { NodePool } from "../../src/nodes/index.js";
import { lockPathOf, settleLockReleases, withNodeLock } from "../../src/staging/node-lock.js";
import { startSlowShellNode, type SlowShellNode } from "../support/slow-shell-node.js";
import { sshNodeConfig, type SshdSet } from "../support/sshd.js";

let slowShell: SlowShellNode;
let dir: string;
let sshd: SshdSet;
let pool: NodePool;

beforeAll(async () => {
  slowShell = await startSlowShellNode(
    "lock-stopped",
    (home, wait) =>
      `case "$BASH_EXECUTION_STRING" in *mkdir*)\n  : > ${home}/asked\n  while [ -e ${home}/slow ]; do ${wait} 0.05; done\n  : > ${home}/started ;;\nesac\n`,
  );
  ({ dir, sshd, pool } = slowShell);
}, 60_000);

afterAll(async () => {
  await slowShell?.close();
});

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const exists = (path: string): Promise<boolean> =>
  stat(path).then(
    () => true,
    () => false,
  );

it("a stop while the node is slow to start the lock's command answers at once; the lock it then makes is given back, and a process about to exit waits for that", async () => {
  const node = pool.get(sshNodeConfig(sshd, 0));
  const file = join(sshd.nodes[0]!.modelDir, "blob-slow");
  const lock = lockPathOf(file);
  await writeFile(join(dir, "slow"), "");
  const stop = new AbortController();
  let worked = false;
  const held = withNodeLock(node, file, () => Promise.resolve((worked = true)), { signal: stop.signal, pollMs: 100 });
  held.catch(() => undefined);
  // The node's shell has the command and waits in its start-up file.
  for (let i = 0; i < 100 && !(await exists(join(dir, "asked"))); i++) await sleep(50);
  expect(await exists(join(dir, "asked"))).toBe(true);

  const stopped = performance.now();
  stop.abort(new Error("stopped by the test"));
  await expect(held).rejects.toMatchObject({ reason: "StagingCancelled" });
  expect(performance.now() - stopped).toBeLessThan(1_000);

  // The node starts the command 2 s after the stop (past the old second look), and it makes the lock.
  const starting = sleep(2_000).then(() => rm(join(dir, "slow")));
  await settleLockReleases();
  // The wait lasted until the command had run on the node, and the lock it made is gone.
  expect(await exists(join(dir, "started"))).toBe(true);
  expect(await exists(lock)).toBe(false);
  await starting;
  expect(worked).toBe(false);

  // Asked again, the lock is free: taken at once.
  await rm(join(dir, "asked"));
  expect(await withNodeLock(node, file, () => Promise.resolve("mine"), { pollMs: 100 })).toBe("mine");
  expect(await exists(lock)).toBe(false);
}, 60_000);

it("a new taking of the same lock by this process waits for that give-back: its lock stays while its work runs", async () => {
  const node = pool.get(sshNodeConfig(sshd, 0));
  const file = join(sshd.nodes[0]!.modelDir, "blob-again");
  const lock = lockPathOf(file);
  await rm(join(dir, "asked"), { force: true });
  await writeFile(join(dir, "slow"), "");
  const stop = new AbortController();
  const first = withNodeLock(node, file, () => Promise.resolve("never"), { signal: stop.signal, pollMs: 100 });
  first.catch(() => undefined);
  for (let i = 0; i < 100 && !(await exists(join(dir, "asked"))); i++) await sleep(50);
  stop.abort(new Error("stopped by the test"));
  await expect(first).rejects.toMatchObject({ reason: "StagingCancelled" });

  // The next pass of this process asks for the same file's lock at once; the stopped taking's
  // command makes its lock a moment later and is given it back. The new holder's lock must be
  // there for the whole of its work: the give-back removes a lock naming this process, whichever
  // taking made it.
  const seen: boolean[] = [];
  const second = withNodeLock(
    node,
    file,
    async () => {
      for (let i = 0; i < 10; i++) {
        seen.push(await exists(lock));
        await sleep(100);
      }
      return "mine";
    },
    { pollMs: 100 },
  );
  await sleep(1_000);
  await rm(join(dir, "slow"));
  expect(await second).toBe("mine");
  expect(seen).toEqual(Array.from({ length: 10 }, () => true));
  await settleLockReleases();
  expect(await exists(lock)).toBe(false);
}, 60_000);
