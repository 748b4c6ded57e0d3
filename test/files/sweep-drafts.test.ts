/**
 * Drafts of whole-file writes left by a process that was killed are removed; those of a process
 * that runs (a write under way, this one) and every other file are left.
 */
import { spawn } from "node:child_process";
import { mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, test } from "vitest";
import { sweepDrafts } from "../../src/files/index.js";

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "sweep-drafts-"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

test("only the drafts of processes that are gone", async () => {
  const child = spawn(process.execPath, ["-e", ""]);
  const gone = await new Promise<number>((resolve) => child.once("exit", () => resolve(child.pid!)));
  const names = [
    `.a.status.json.${gone}.ae03ae69.tmp`,
    `.router.yaml.${gone}.0123abcd.tmp`,
    `.b.status.json.${process.pid}.ae03ae69.tmp`,
    "a.status.json",
    `.notes.${gone}.tmp`,
    `a.toml.${gone}.ae03ae69.tmp`,
  ];
  for (const name of names) await writeFile(join(dir, name), "x");
  expect((await sweepDrafts(dir)).sort()).toEqual([`.a.status.json.${gone}.ae03ae69.tmp`, `.router.yaml.${gone}.0123abcd.tmp`]);
  expect((await readdir(dir)).sort()).toEqual(
    [`.b.status.json.${process.pid}.ae03ae69.tmp`, `.notes.${gone}.tmp`, "a.status.json", `a.toml.${gone}.ae03ae69.tmp`].sort(),
  );
  expect(await sweepDrafts(join(dir, "absent"))).toEqual([]);
});
