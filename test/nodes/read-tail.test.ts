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

  // Regression: mlx_lm.server logs every request; shardctl's health probes (one a second) filled the
  // 20-line evidence of a hung engine with access-log lines, and its last real words were gone.
  it("lines left out (a server's access log of health probes) are said as one count, and the tail keeps its length", async () => {
    const probe = (s: number): string => `127.0.0.1 - - [05/Dec/2026 06:00:${String(s).padStart(2, "0")}] "GET /health HTTP/1.1" 200 -`;
    const leaveOut = { pattern: /"GET \/health HTTP\/[\d.]+"/, what: "of GET /health requests" };
    const read = (file: string, lines: number): Promise<string[]> => readTail(both.node(kind), join(dir(), file), lines, 5_000, { leaveOut });
    const early = Array.from({ length: 10 }, (_, i) => `loading layer ${i}`);
    await writeFile(
      join(dir(), "probed.log"),
      [...early, probe(1), "RuntimeError: ring peer 1 stopped answering", ...Array.from({ length: 40 }, (_, i) => probe(i + 2))].join("\n") + "\n",
    );
    // The probe between two kept lines is counted too.
    expect(await read("probed.log", 4)).toEqual([
      "(… 41 lines of GET /health requests left out)",
      "loading layer 8",
      "loading layer 9",
      "RuntimeError: ring peer 1 stopped answering",
    ]);
    expect(await read("probed.log", 12)).toEqual(["(… 41 lines of GET /health requests left out)", ...early, "RuntimeError: ring peer 1 stopped answering"]);
    // One line of 1 is said in the singular.
    await writeFile(join(dir(), "one-probe.log"), `a\nb\n${probe(1)}\nc\n`);
    expect(await read("one-probe.log", 3)).toEqual(["(… 1 line of GET /health requests left out)", "b", "c"]);
    // Nothing left out among the last lines: they are as without the option.
    await writeFile(join(dir(), "quiet.log"), `${probe(1)}\na\nb\nc\n`);
    expect(await read("quiet.log", 3)).toEqual(["a", "b", "c"]);
    // A probe between the two lines a tail of two keeps is counted; a tail of one keeps its line.
    await writeFile(join(dir(), "two.log"), `a\n${probe(1)}\nb\n${probe(2)}\nc\n`);
    expect(await read("two.log", 2)).toEqual(["(… 1 line of GET /health requests left out)", "c"]);
    expect(await read("two.log", 1)).toEqual(["c"]);
    // Only probes: the count alone.
    await writeFile(join(dir(), "only-probes.log"), `${probe(1)}\n${probe(2)}\n`);
    expect(await read("only-probes.log", 20)).toEqual(["(… 2 lines of GET /health requests left out)"]);
  });

  it("a file that is not there has no lines", async () => {
    expect(await tail("missing.log")).toEqual([]);
  });
});
