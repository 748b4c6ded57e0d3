/**
 * Whole-file replacement on a real file system: a new file gets 0644 whatever the umask (status
 * files are read by other users and CI jobs), an existing file keeps its own mode, and nothing of
 * the draft is left behind.
 */
import { chmod, mkdtemp, readdir, readFile, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, test } from "vitest";
import { writeFileAtomic } from "../../src/files/index.js";

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "write-file-atomic-"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

test("a new file is 0644 under umask 077; an existing one keeps its mode", async () => {
  const old = process.umask(0o077);
  try {
    await writeFileAtomic(join(dir, "x.status.json"), "{}\n");
    expect((await stat(join(dir, "x.status.json"))).mode & 0o777).toBe(0o644);
    await chmod(join(dir, "x.status.json"), 0o640);
    await writeFileAtomic(join(dir, "x.status.json"), "{ }\n");
    expect((await stat(join(dir, "x.status.json"))).mode & 0o777).toBe(0o640);
  } finally {
    process.umask(old);
  }
  expect(await readFile(join(dir, "x.status.json"), "utf8")).toBe("{ }\n");
  expect(await readdir(dir)).toEqual(["x.status.json"]);
});
