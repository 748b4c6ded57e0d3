/** `shardctl status` and `diff` with no definitions directory: one clean error naming it, as the daemon gives. */
import { mkdtemp, realpath, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, test } from "vitest";
import { requireBuild, shardctl } from "./support/run-shardctl.js";

let root: string;
beforeAll(async () => {
  requireBuild();
  root = await realpath(await mkdtemp(join(tmpdir(), "shardctl-missing-dir-")));
  await writeFile(join(root, "shardctl.toml"), `[daemon]\nstate_dir = "state"\n\n[nodes.n1]\nhost = "local"\nmodel_dir = "m1"\n`);
});
afterAll(async () => {
  if (root !== undefined) await rm(root, { recursive: true, force: true });
});

const missing = (dir: string): string => `shardctl: ${dir} is not a directory of cluster definitions; create it or pass --dir <directory>\n`;

test.each(["status", "diff"])("%s --dir nosuch: exit 1, the directory named and what to do, no stack trace", async (command) => {
  const run = await shardctl([command, "--dir", "nosuch"], { cwd: root });
  expect(run).toEqual({ code: 1, stdout: "", stderr: missing(join(root, "nosuch")) });
});

test.each(["status", "diff"])("%s with no clusters/ beside the settings: the default directory named", async (command) => {
  const run = await shardctl([command], { cwd: root });
  expect(run).toEqual({ code: 1, stdout: "", stderr: missing(join(root, "clusters")) });
});

test("status --dir <a file>: the same error, not ENOTDIR", async () => {
  const run = await shardctl(["status", "--dir", "shardctl.toml"], { cwd: root });
  expect(run).toEqual({ code: 1, stdout: "", stderr: missing(join(root, "shardctl.toml")) });
});
