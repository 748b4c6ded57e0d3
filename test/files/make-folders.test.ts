/**
 * `mkdir -p` on a read-only file system (a real tmpfs mounted read-only) says EROFS, where Node's
 * recursive mkdir says ENOENT for a folder whose parent is right there; made folders are made.
 */
import { execFile } from "node:child_process";
import { mkdir, mkdtemp, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, expect, test } from "vitest";
import { makeFolders } from "../../src/files/index.js";

const run = promisify(execFile);
let root: string;
beforeAll(async () => {
  if (process.getuid?.() !== 0) throw new Error("this test mounts a read-only tmpfs: run it as root");
  root = await mkdtemp(join(tmpdir(), "make-folders-"));
  await mkdir(join(root, "ro"));
  await run("mount", ["-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", join(root, "ro")]);
});
afterAll(async () => {
  await run("umount", [join(root, "ro")]).catch(() => undefined);
  await rm(root, { recursive: true, force: true });
});

test("a folder on a read-only file system: EROFS, naming the first folder it could not make", async () => {
  await expect(mkdir(join(root, "ro", "a", "b"), { recursive: true })).rejects.toMatchObject({ code: "ENOENT" });
  await expect(makeFolders(join(root, "ro", "a", "b"))).rejects.toMatchObject({ code: "EROFS", path: join(root, "ro", "a") });
});

test("folders that can be made are made, and made again without complaint", async () => {
  await makeFolders(join(root, "rw", "a", "b"));
  await makeFolders(join(root, "rw", "a", "b"));
  expect((await stat(join(root, "rw", "a", "b"))).isDirectory()).toBe(true);
});
