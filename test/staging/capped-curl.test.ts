/**
 * The program that runs curl on a node with its body capped, run by the node's own sh (dash on
 * Debian): it passes curl's exit status out, keeps at most the listed size plus one byte, resumes
 * from the file's own size, stops an earlier writer of the file before touching it, and says 97 when
 * it cannot truncate the file it is to write. A stand-in "curl" (a shell command writing to stdout)
 * feeds it; the program appends `--continue-at <bytes>` to its arguments when it resumes.
 */
import { execFile, spawn } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
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

async function capped(size: number, out: string, mode: "new" | "append", ...command: string[]): Promise<number> {
  try {
    await run("sh", ["-c", cappedCurlScript, "sh", String(size), out, mode, ...command]);
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

it("keeps at most one byte past the listed size of a longer body", async () => {
  const out = join(dir, "long");
  await capped(10, out, "new", "sh", "-c", "head -c 100000 /dev/zero");
  expect((await readFile(out)).length).toBe(11);
});

it("resumes from the file's own size, and leaves a file already at its listed size alone", async () => {
  const out = join(dir, "resume");
  await writeFile(out, "abc");
  // The stand-in prints the offset it was asked to resume from ($2 after --continue-at).
  expect(await capped(100, out, "append", "sh", "-c", 'printf "[%s %s]" "$1" "$2"', "sh")).toBe(0);
  expect(await readFile(out, "utf8")).toBe("abc[--continue-at 3]");
  await writeFile(out, "0123456789");
  expect(await capped(10, out, "append", "sh", "-c", "printf more")).toBe(0);
  expect(await readFile(out, "utf8")).toBe("0123456789");
});

it("stops an earlier download still writing the file before it appends", async () => {
  const out = join(dir, "orphan");
  // The earlier download: a body that never ends, 64 KiB of zeros every 20 ms, ending at a failed
  // write as curl does (exit 23); its program is left running.
  const endless = "while :; do head -c 65536 /dev/zero || exit 23; sleep 0.02; done";
  // In a group of its own, so that whatever happens below, all of it is killed at the end.
  const earlier = spawn("sh", ["-c", cappedCurlScript, "sh", String(64 << 20), out, "new", "sh", "-c", endless], { stdio: "ignore", detached: true });
  const exited = new Promise((resolve) => earlier.once("exit", resolve));
  const within = <T>(promise: Promise<T>, ms: number, what: string): Promise<T> =>
    Promise.race([promise, new Promise<T>((_, reject) => setTimeout(() => reject(new Error(`${what} within ${ms} ms`)), ms))]);
  try {
    while ((await readFile(out).catch(() => Buffer.alloc(0))).length < 200_000) await new Promise((r) => setTimeout(r, 20));
    const record = (await readFile(`${out}.writer`, "utf8")).split("\n");
    const writer = Number(record[0]);
    expect(record[1]).not.toBe("");
    expect(await capped(64 << 20, out, "append", "sh", "-c", 'printf "[%s]" "$2"', "sh")).toBe(0);
    // The earlier download ends (its curl at its next write), its writer gone, and the resume offset is the size it left.
    await within(exited, 10_000, "the earlier download did not end");
    expect(() => process.kill(writer, 0)).toThrow();
    const bytes = await readFile(out);
    const have = bytes.indexOf("[");
    expect(have).toBeGreaterThanOrEqual(200_000);
    expect(bytes.subarray(0, have).every((b) => b === 0)).toBe(true);
    expect(bytes.subarray(have).toString()).toBe(`[${have}]`);
    await new Promise((r) => setTimeout(r, 100));
    expect((await readFile(out)).length).toBe(bytes.length);
  } finally {
    try {
      process.kill(-earlier.pid!, "SIGKILL");
    } catch {
      // The group is gone already.
    }
  }
});

it("exits 97 when the file cannot be truncated (its directory is missing)", async () => {
  expect(await capped(10, join(dir, "no-such-dir", "file"), "new", "sh", "-c", "printf x")).toBe(97);
});
