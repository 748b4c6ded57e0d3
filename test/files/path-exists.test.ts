/**
 * Whether a directory entry is there: "no" only when the file system says there is none. Any other
 * failure (here a loop of links on the way; a permission taken away or a network mount's error
 * elsewhere) is thrown, since a caller that took it for "absent" would prune a running cluster.
 */
import { mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { entryExists } from "../../src/files/index.js";

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "shardctl-entry-exists-"));
  await writeFile(join(dir, "file.toml"), "");
  await symlink("nowhere", join(dir, "dangling.toml"));
  await symlink("loop", join(dir, "loop"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

it("a file and a link to nothing are there; a missing name, or one under a file, is not", async () => {
  expect(await entryExists(join(dir, "file.toml"))).toBe(true);
  expect(await entryExists(join(dir, "dangling.toml"))).toBe(true);
  expect(await entryExists(join(dir, "gone.toml"))).toBe(false);
  expect(await entryExists(join(dir, "file.toml", "x.toml"))).toBe(false);
});

it("a failure that says nothing of the entry is thrown, not taken for absence", async () => {
  await expect(entryExists(join(dir, "loop", "x.toml"))).rejects.toMatchObject({ code: "ELOOP" });
});
