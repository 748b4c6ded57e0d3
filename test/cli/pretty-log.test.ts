/** The human log line: what it shows, what it leaves out, and when it is coloured. */
import { describe, expect, test } from "vitest";
import { formatLogLine, wantsColour } from "../../src/cli/pretty-log.js";

// eslint-disable-next-line no-control-regex -- matching terminal escape codes is the point
const escapeCode = /\u001b\[[0-9;]*m/g;
// 2024-03-05 14:07:09.042 in this process's time zone, as the line shows it.
const time = new Date(2024, 2, 5, 14, 7, 9, 42).getTime();

function line(fields: Record<string, unknown>): string {
  return JSON.stringify({ level: 30, time, pid: process.pid, hostname: "mac-1", name: "shardctl-daemon", ...fields });
}

describe("formatLogLine", () => {
  test("time, level, component, message, then the remaining fields as key=value", () => {
    const text = formatLogLine(line({ component: "router", url: "http://127.0.0.1:8088", backends: ["demo"], weight: 2, msg: "router listening" }), false);
    expect(text).toBe('14:07:09.042 INFO  [router] router listening url=http://127.0.0.1:8088 backends=["demo"] weight=2\n');
  });

  test("strings that would read ambiguously are quoted; another process's pid is kept, this one's is not", () => {
    const text = formatLogLine(line({ level: 40, msg: "launch failed", steps: "read 1ms, launch 7ms (failed)", stage: 12345 }), false);
    expect(text).toBe('14:07:09.042 WARN  launch failed steps="read 1ms, launch 7ms (failed)" stage=12345\n');
    expect(formatLogLine(line({ msg: "adopted", pid: process.pid + 1 }), false)).toContain(` pid=${process.pid + 1}\n`);
  });

  test("an error shows its reason and message, never its stack", () => {
    const err = { type: "ShardctlError", message: "cannot read router config", stack: "ShardctlError: …\n    at x (y.js:1:1)", reason: "RouterConfigUnreadable" };
    const text = formatLogLine(line({ level: 50, err, msg: "router config not reloaded" }), false);
    expect(text).toBe('14:07:09.042 ERROR router config not reloaded err="RouterConfigUnreadable: cannot read router config"\n');
  });

  test("a multi-line message stays indented under its line; a line that is not JSON passes through", () => {
    expect(formatLogLine(line({ msg: "first\nsecond" }), false)).toBe("14:07:09.042 INFO  first\n    second\n");
    expect(formatLogLine("not json", false)).toBe("not json\n");
  });

  test("colour only when asked: the same text once the codes are removed", () => {
    const input = line({ level: 50, msg: "boom", cluster: "demo" });
    const coloured = formatLogLine(input, true);
    expect(coloured).toMatch(escapeCode);
    expect(coloured).toContain("\u001b[31mERROR\u001b[0m");
    expect(coloured.replace(escapeCode, "")).toBe(formatLogLine(input, false));
    expect(formatLogLine(input, false)).not.toMatch(escapeCode);
  });
});

describe("wantsColour", () => {
  const terminal = { isTTY: true, hasColors: () => true };
  const monochrome = { isTTY: true, hasColors: () => false };
  const pipe = { isTTY: false };
  test.each([
    ["a colour terminal", {}, terminal, true],
    ["a terminal without colours", {}, monochrome, false],
    ["a pipe", {}, pipe, false],
    ["NO_COLOR on a colour terminal", { NO_COLOR: "1" }, terminal, false],
    ["NO_COLOR set empty (no-color.org: ignored)", { NO_COLOR: "" }, terminal, true],
    ["FORCE_COLOR through a pipe", { FORCE_COLOR: "1" }, pipe, true],
    ["FORCE_COLOR empty through a pipe (as Node reads it)", { FORCE_COLOR: "" }, pipe, true],
    ["FORCE_COLOR=0 on a colour terminal", { FORCE_COLOR: "0" }, terminal, false],
    ["FORCE_COLOR=false on a colour terminal", { FORCE_COLOR: "false" }, terminal, false],
    ["FORCE_COLOR with NO_COLOR: the one set for this command wins", { FORCE_COLOR: "1", NO_COLOR: "1" }, pipe, true],
  ] as const)("%s", (_case, env, stream, expected) => {
    expect(wantsColour(env, stream)).toBe(expected);
  });
});
