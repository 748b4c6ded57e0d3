import { describe, expect, it } from "vitest";
import { isShardctlError } from "../../src/errors/index.js";
import { parsePortRange, parseSize } from "../../src/spec/index.js";

describe("parseSize", () => {
  it.each([
    ["0", 0],
    ["1024", 1024],
    ["512B", 512],
    ["1KB", 1000],
    ["1KiB", 1024],
    ["64GiB", 64 * 2 ** 30],
    ["64 GiB", 64 * 2 ** 30],
    ["1.5GiB", 1.5 * 2 ** 30],
    ["2TB", 2e12],
    ["3MiB", 3 * 2 ** 20],
    ["1TiB", 2 ** 40],
  ])("%s → %d bytes", (text, bytes) => {
    expect(parseSize(text)).toBe(bytes);
  });

  it.each(["", "GiB", "64gib", "-1GiB", "64 gigs", "1e9", "64GiB;"])("refuses %j", (text) => {
    expect(() => parseSize(text)).toThrow(/is not a size: expected a size like "64GiB"/);
    try {
      parseSize(text);
    } catch (error) {
      expect(isShardctlError(error, "InvalidSize")).toBe(true);
    }
  });

  it.each(["99999999999TiB", "9999999999999999999999999999"])("refuses %j as too large, saying the largest size", (text) => {
    expect(() => parseSize(text)).toThrow(`"${text}" is too large: a size is at most 9007199254740991 bytes (just under 8 PiB)`);
  });
});

describe("parsePortRange", () => {
  it("parses an inclusive range", () => {
    expect(parsePortRange("39600-39629")).toEqual({ first: 39600, last: 39629 });
    expect(parsePortRange("1024-1024")).toEqual({ first: 1024, last: 1024 });
  });

  it.each([
    ["39629-39600", '"39629-39600": the first port must not be greater than the last'],
    ["80-90", '"80-90": ports must lie within 1024-65535'],
    ["60000-70000", '"60000-70000": ports must lie within 1024-65535'],
    ["39600", `"39600" is not allowed: expected a port range 'first-last', e.g. "39600-39629"`],
  ])("refuses %s", (text, message) => {
    expect(() => parsePortRange(text)).toThrow(message);
  });
});
