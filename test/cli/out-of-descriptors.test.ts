/**
 * A hard limit of open files too low for Node to load the program (a service manager's or a
 * container's): one line saying what ran out and where to raise it, never a stack trace nor Node's
 * "Cannot find package" for a package that is there (which it says at some limits).
 */
import { mkdtemp, realpath, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, test } from "vitest";
import { repoRoot, requireBuild, runFile, shardctlBin } from "./support/run-shardctl.js";

const shardEngineBin = join(repoRoot, "dist/src/cli/shard-engine.js");

let root: string;
beforeAll(async () => {
  requireBuild();
  root = await realpath(await mkdtemp(join(tmpdir(), "shardctl-descriptors-")));
});
afterAll(async () => {
  if (root !== undefined) await rm(root, { recursive: true, force: true });
});

/** `program args…` under `ulimit -n limit` (soft and hard), run from an empty folder. */
function withLimit(limit: number, program: readonly string[]) {
  return runFile("/bin/sh", ["-c", `ulimit -n ${limit} && exec "$@"`, "sh", ...program], { cwd: root });
}

const advice = (program: string) =>
  new RegExp(`^${program}: ${program} ran out of file descriptors \\(EMFILE\\): this process may open (at most \\d+|too few) files .*raise the hard limit.*LimitNOFILE=`);

test.each([28, 48, 64, 100])("shardctl status with a hard limit of %i open files: exit 1, one line saying what to raise", async (limit) => {
  const run = await withLimit(limit, [process.execPath, shardctlBin, "status"]);
  expect(run.code).toBe(1);
  expect(run.stderr).toMatch(advice("shardctl"));
  expect(run.stderr.trimEnd().split("\n")).toHaveLength(1);
  expect(run.stdout).toBe("");
});

test("shardctl starts with the 200 open files the words ask for (status reaches its own question)", async () => {
  const run = await withLimit(200, [process.execPath, shardctlBin, "status"]);
  expect(run).toEqual({ code: 1, stdout: "", stderr: "shardctl: shardctl.toml: no settings file here; pass --config <file> or run where shardctl.toml is\n" });
});

test("shard-engine with a hard limit of 28 open files: exit 1, one line saying what to raise", async () => {
  const run = await withLimit(28, [shardEngineBin, "--version"]);
  expect(run.code).toBe(1);
  expect(run.stderr).toMatch(advice("shard-engine"));
  expect(run.stderr.trimEnd().split("\n")).toHaveLength(1);
});
