/**
 * The last lines of an engine's log, the evidence a status keeps of a failure, on a local node and a
 * real SSH node: only the file's end is read, a line redrawn with carriage returns is its last
 * drawing, and a line of megabytes is cut. A log of 600 MiB (sparse here) still gives its tail.
 */
import { appendFile, rm, truncate, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { maxTailLineChars, readTail } from "../../src/nodes/index.js";
import { startBothNodes, type BothNodes } from "../support/both-nodes.js";

let both: BothNodes;

beforeAll(async () => {
  both = await startBothNodes("shardctl-read-tail-");
}, 60_000);

afterAll(async () => {
  await both?.close();
});

describe.each(["local", "ssh"] as const)("%s node", (kind) => {
  // The sshd nodes run as this user on this machine: their model dir is written here directly.
  const dir = (): string => both.dir(kind);
  const tail = (file: string, lines = 20): Promise<string[]> => readTail(both.node(kind), join(dir(), file), lines, 5_000);

  it("the last lines, CRLF and carriage-return redraws as a terminal shows them", async () => {
    await writeFile(join(dir(), "plain.log"), "one\r\ntwo\n\nloading 10%\rloading 50%\rloading 100%\nFATAL: no memory\n");
    expect(await tail("plain.log")).toEqual(["one", "two", "loading 100%", "FATAL: no memory"]);
    expect(await tail("plain.log", 2)).toEqual(["loading 100%", "FATAL: no memory"]);
  });

  // Regression: a 5 MiB progress bar with no newline went whole into the status file (5.4 MB, and
  // growing with each failed launch).
  it("a line of megabytes is cut to its first characters and a count", async () => {
    const bar = "#".repeat(5 * 1024 * 1024);
    await writeFile(join(dir(), "bar.log"), `starting\n${bar}\nFATAL: died\n`);
    const lines = await tail("bar.log");
    expect(lines.at(-1)).toBe("FATAL: died");
    // Only the file's last 64 KiB were read: the bar's end, cut.
    expect(lines.at(-2)).toMatch(new RegExp(`^…#{${maxTailLineChars - 1}}… \\(\\d+ more characters\\)$`));
    expect(lines).not.toContain("starting");
    expect(lines.every((l) => l.length < maxTailLineChars + 40)).toBe(true);
  });

  // Regression: a 600 MiB log was read whole; past Node's longest string the tail came back empty.
  it("a log of 600 MiB gives its last lines", async () => {
    const file = join(dir(), "huge.log");
    await writeFile(file, "");
    await truncate(file, 600 * 1024 * 1024);
    await appendFile(file, "\nFATAL: the last words\n");
    expect((await tail("huge.log")).at(-1)).toBe("FATAL: the last words");
    await rm(file);
  });

  it("a file that is not there has no lines", async () => {
    expect(await tail("missing.log")).toEqual([]);
  });
});
