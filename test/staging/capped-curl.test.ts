/**
 * The program that runs curl on a node with its body capped, run by the node's own sh (dash on
 * Debian): it passes curl's exit status out, keeps at most the cap, and says 97 when it cannot
 * truncate the file it is to write. A stand-in "curl" (a shell command writing to stdout) feeds it.
 */
import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, expect, it } from "vitest";
import { cappedCurlScript } from "../../src/staging/capped-curl.js";

const run = promisify(execFile);
let dir: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "shardctl-capped-curl-"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function capped(cap: number, out: string, mode: "new" | "append", ...command: string[]): Promise<number> {
  try {
    await run("sh", ["-c", cappedCurlScript, "sh", String(cap), out, mode, ...command]);
    return 0;
  } catch (error) {
    return (error as { code: number }).code;
  }
}

it("passes the command's exit status out and keeps the body when it fits", async () => {
  const out = join(dir, "fits");
  expect(await capped(100, out, "new", "sh", "-c", "printf hello; exit 0")).toBe(0);
  expect(await readFile(out, "utf8")).toBe("hello");
  expect(await capped(100, out, "append", "sh", "-c", "printf ' world'; exit 7")).toBe(7);
  expect(await readFile(out, "utf8")).toBe("hello world");
});

it("keeps at most the cap of a longer body", async () => {
  const out = join(dir, "long");
  await capped(10, out, "new", "sh", "-c", "head -c 100000 /dev/zero");
  expect((await readFile(out)).length).toBe(10);
});

it("exits 97 when the file cannot be truncated (its directory is missing)", async () => {
  expect(await capped(10, join(dir, "no-such-dir", "file"), "new", "sh", "-c", "printf x")).toBe(97);
});
