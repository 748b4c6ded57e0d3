/**
 * One daemon per watched directory. The lock is a file in the state directory named after the
 * directory, created exclusively and holding the owner's pid; a lock whose pid no longer runs is
 * stale (the owner was killed) and is taken over.
 */
import { createHash } from "node:crypto";
import { mkdir, open, readFile, rm } from "node:fs/promises";
import { join } from "node:path";
import { ShardctlError } from "../spec/errors.js";

export interface DaemonLock {
  file: string;
  release(): Promise<void>;
}

export async function acquireDaemonLock(stateDir: string, watchedDir: string): Promise<DaemonLock> {
  await mkdir(stateDir, { recursive: true });
  const id = createHash("sha256").update(watchedDir).digest("hex").slice(0, 16);
  const file = join(stateDir, `daemon-${id}.lock`);
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const handle = await open(file, "wx");
      await handle.writeFile(`${process.pid}\n${watchedDir}\n`);
      await handle.close();
      return { file, release: () => releaseIfOurs(file) };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
      const owner = await readOwner(file);
      if (owner !== undefined && isRunning(owner)) {
        throw new ShardctlError(
          "DaemonAlreadyRunning",
          `another shardctl daemon (pid ${owner}) already watches ${watchedDir}; stop it first (kill ${owner}) or watch another directory`,
          { terminal: true },
        );
      }
      // Stale: its owner is gone.
      await rm(file, { force: true });
    }
  }
  throw new ShardctlError("DaemonLockFailed", `could not take the daemon lock ${file}`);
}

async function readOwner(file: string): Promise<number | undefined> {
  const text = await readFile(file, "utf8").catch(() => "");
  const pid = Number(text.split("\n")[0]);
  return Number.isInteger(pid) && pid > 0 ? pid : undefined;
}

function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

async function releaseIfOurs(file: string): Promise<void> {
  if ((await readOwner(file)) === process.pid) await rm(file, { force: true });
}
