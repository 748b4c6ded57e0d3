/**
 * A real sshd node whose sessions run a start-up file (BASH_ENV) the test writes: a shell slow to
 * start, as a pyenv or conda init waiting for a lock, or a home on a stalled network mount, makes
 * it. The file may wait while `<dir>/slow` exists; close() removes that flag first. `wait` is sleep
 * under a name of the test's own, for the file to wait with, so that close() can stop whatever
 * still waits. No vitest imports.
 */
import { execFile } from "node:child_process";
import { chmod, copyFile, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { NodePool } from "../../src/nodes/index.js";
import { startSshdNodes, type SshdSet } from "./sshd.js";

const run = promisify(execFile);

export interface SlowShellNode {
  /** The test's temp directory: the start-up file, `wait`, and any flag the file reads. */
  dir: string;
  /** The path of sleep under the test's own name. */
  wait: string;
  sshd: SshdSet;
  pool: NodePool;
  close(): Promise<void>;
}

/** Start one sshd node whose sessions run `startup(dir, wait)` as their start-up file. `name` names the temp directory and `wait`. */
export async function startSlowShellNode(name: string, startup: (dir: string, wait: string) => string): Promise<SlowShellNode> {
  const dir = await mkdtemp(join(tmpdir(), `shardctl-${name}-`));
  const wait = join(dir, `${name}-wait`);
  await copyFile("/bin/sleep", wait);
  await chmod(wait, 0o755);
  await writeFile(join(dir, "startup.sh"), startup(dir, wait));
  const sshd = await startSshdNodes({ count: 1, setEnv: [`BASH_ENV=${join(dir, "startup.sh")}`] });
  const pool = new NodePool({ knownHostsPath: sshd.knownHostsPath, sshConfigPath: join(sshd.root, "no-config") });
  return {
    dir,
    wait,
    sshd,
    pool,
    close: async () => {
      await rm(join(dir, "slow"), { force: true });
      await pool.close();
      await sshd.close();
      await run("pkill", ["-f", wait]).catch(() => undefined);
      await rm(dir, { recursive: true, force: true });
    },
  };
}
