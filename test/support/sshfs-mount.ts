/**
 * A real sshfs (FUSE) mount of a folder of a real sshd node, for tests of file systems that hang:
 * `freeze` stops the sshfs process with SIGSTOP, as a hung server leaves it, so every read of the
 * mount that the kernel cannot answer from its caches waits (state D) until `thaw`. Needs root,
 * /dev/fuse, and the Debian package sshfs (installed here when missing).
 */
import { execFile, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { aptInstall } from "./apt.js";
import type { SshdSet } from "./sshd.js";

const run = promisify(execFile);

export interface SshfsMount {
  /** Where the node's folder is mounted on this machine. */
  path: string;
  freeze(): void;
  thaw(): void;
  /** Thaw, unmount and end the sshfs process. */
  close(): Promise<void>;
}

/**
 * Mounts `remoteDir` of `sshd`'s first node at `mountPoint` (made when missing); `ready` is a file
 * under it that must show. With `pageCache`, reads go through the kernel's page cache, as on a disk
 * or an NFS mount: a reader of a frozen mount then waits in state D (without it, in FUSE's own
 * wait, state S).
 */
export async function mountSshfs(sshd: SshdSet, remoteDir: string, mountPoint: string, ready: string, { pageCache = false } = {}): Promise<SshfsMount> {
  if (process.getuid?.() !== 0) throw new Error("mounting a FUSE file system needs root");
  if (!existsSync("/dev/fuse")) throw new Error("/dev/fuse is missing: FUSE is not available here");
  if ((await run("sh", ["-c", "command -v sshfs || true"])).stdout.trim() === "") await aptInstall(["sshfs"]);
  const node = sshd.nodes[0]!;
  await mkdir(mountPoint, { recursive: true });
  // Foreground (-f), so that its pid is this child's; no caches, so a read after the freeze reaches it.
  const sshfs = spawn(
    "sshfs",
    [
      "-f",
      "-o",
      `port=${node.port},IdentityFile=${sshd.identityFile},UserKnownHostsFile=${sshd.knownHostsPath},StrictHostKeyChecking=yes,BatchMode=yes`,
      "-o",
      pageCache ? "kernel_cache" : "cache=no,attr_timeout=0,entry_timeout=0,negative_timeout=0",
      `${node.user}@${node.host}:${remoteDir}`,
      mountPoint,
    ],
    { stdio: ["ignore", "ignore", "pipe"] },
  );
  let said = "";
  sshfs.stderr.on("data", (chunk: Buffer) => (said += chunk.toString()));
  const shown = join(mountPoint, ready);
  for (let i = 0; i < 100 && !existsSync(shown); i++) await new Promise((r) => setTimeout(r, 100));
  if (!existsSync(shown)) {
    sshfs.kill("SIGKILL");
    throw new Error(`the sshfs mount did not come up: ${said}`);
  }
  const pid = sshfs.pid!;
  return {
    path: mountPoint,
    freeze: () => process.kill(pid, "SIGSTOP"),
    thaw: () => process.kill(pid, "SIGCONT"),
    close: async () => {
      process.kill(pid, "SIGCONT");
      await run("fusermount", ["-u", mountPoint]).catch(() => run("umount", ["-l", mountPoint]).catch(() => undefined));
      sshfs.kill("SIGKILL");
    },
  };
}
