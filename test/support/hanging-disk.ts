/**
 * A real disk that can be made to hang: an ext4 file system on a loop device whose backing file
 * lies on an sshfs mount of a real sshd node. `freeze` stops the sshfs process, so the loop device
 * completes no more I/O and a reader of the disk waits in the kernel in state D, as on a failing
 * disk or a hard NFS mount, until `thaw`. Needs root, loop devices, /dev/fuse, mkfs.ext4 and sshfs.
 */
import { execFile } from "node:child_process";
import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { aptInstall } from "./apt.js";
import { mountSshfs } from "./sshfs-mount.js";
import type { SshdSet } from "./sshd.js";

const run = promisify(execFile);

export interface HangingDisk {
  /** Where the disk's file system is mounted. */
  path: string;
  freeze(): void;
  thaw(): void;
  /** Thaw, unmount the disk, detach its loop device and unmount its backing store. */
  close(): Promise<void>;
}

/** A `sizeMiB` disk mounted under `root` (read-write: write what the test needs, then `remountReadOnly`). */
export async function makeHangingDisk(sshd: SshdSet, root: string, sizeMiB = 16): Promise<HangingDisk & { remountReadOnly(): Promise<void> }> {
  if ((await run("sh", ["-c", "command -v mkfs.ext4 losetup || true"])).stdout.trim().split("\n").length < 2) await aptInstall(["e2fsprogs", "mount"]);
  const image = join(sshd.nodes[0]!.modelDir, "disk.img");
  await run("truncate", ["-s", `${sizeMiB}M`, image]);
  await run("mkfs.ext4", ["-q", "-F", image]);
  const backing = await mountSshfs(sshd, sshd.nodes[0]!.modelDir, join(root, "backing"), "disk.img");
  let loop: string | undefined;
  const path = join(root, "disk");
  try {
    loop = (await run("losetup", ["-f", "--show", join(backing.path, "disk.img")])).stdout.trim();
    await mkdir(path, { recursive: true });
    await run("mount", [loop, path]);
  } catch (error) {
    if (loop !== undefined) await run("losetup", ["-d", loop]).catch(() => undefined);
    await backing.close();
    throw error;
  }
  return {
    path,
    freeze: backing.freeze,
    thaw: backing.thaw,
    // A fresh mount holds nothing of the disk in memory: every read reaches the loop device.
    remountReadOnly: async () => {
      await run("umount", [path]);
      await run("mount", ["-o", "ro", loop!, path]);
    },
    close: async () => {
      backing.thaw();
      await run("umount", [path]).catch(() => run("umount", ["-l", path]).catch(() => undefined));
      await run("losetup", ["-d", loop!]).catch(() => undefined);
      await backing.close();
    },
  };
}
