/**
 * Output nobody can read is not success: a command whose stdout cannot be written (a full disk
 * under `> plan.json`) says so on stderr and exits 1; one whose reader went away (`| head`) ends
 * quietly, without a stack.
 */
import { spawn } from "node:child_process";
import { openSync, closeSync } from "node:fs";
import { beforeAll, expect, test } from "vitest";
import { requireBuild, shardctlBin } from "./support/run-shardctl.js";

beforeAll(() => requireBuild());

function runInto(stdout: "full" | "closed-after-first-chunk"): Promise<{ code: number | null; stderr: string }> {
  const full = stdout === "full" ? openSync("/dev/full", "w") : undefined;
  const child = spawn(process.execPath, [shardctlBin, "schemas"], { stdio: ["ignore", full ?? "pipe", "pipe"] });
  if (full !== undefined) closeSync(full);
  // A reader that takes the first chunk and goes away, as `| head -c 10` does.
  child.stdout?.once("data", () => child.stdout!.destroy());
  let stderr = "";
  child.stderr!.on("data", (d: Buffer) => (stderr += d.toString()));
  return new Promise((resolve) => child.once("close", (code) => resolve({ code, stderr })));
}

test("stdout on a full disk: exit 1, said on stderr", async () => {
  const run = await runInto("full");
  expect(run.code).toBe(1);
  expect(run.stderr).toMatch(/^shardctl: cannot write the output: .*ENOSPC/m);
  expect(run.stderr).not.toMatch(/\n\s+at /);
});

test("a reader that went away: no stack, no complaint", async () => {
  const run = await runInto("closed-after-first-chunk");
  expect(run.stderr).toBe("");
  expect(run.code).toBe(0);
});
