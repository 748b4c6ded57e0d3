import { describe, expect, it } from "vitest";
import { locateKeys } from "../../src/spec/locate.js";

const text = [
  /* 1 */ "# comment = not a key",
  /* 2 */ 'top = "a # not a comment"',
  /* 3 */ "[tbl]",
  /* 4 */ '  "quoted key" = 1',
  /* 5 */ "a.b.c = [1, [2, 3], { x = 4 }]",
  /* 6 */ "multi = '''",
  /* 7 */ "key = inside the string",
  /* 8 */ "'''",
  /* 9 */ "[[arr]]",
  /* 10 */ "v = 1",
  /* 11 */ "[[arr]]",
  /* 12 */ 'v = "two"',
  /* 13 */ "[tbl.sub]",
].join("\n");

describe("locateKeys", () => {
  const at = locateKeys(text);

  it("finds keys and values of plain, quoted and dotted keys", () => {
    expect(at.key(["top"])).toEqual({ line: 2, col: 1 });
    expect(at.value(["top"])).toEqual({ line: 2, col: 7 });
    expect(at.key(["tbl", "quoted key"])).toEqual({ line: 4, col: 3 });
    expect(at.key(["tbl", "a", "b"])).toEqual({ line: 5, col: 3 });
    expect(at.value(["tbl", "a", "b", "c"])).toEqual({ line: 5, col: 9 });
  });

  it("finds nested array elements and inline-table keys", () => {
    expect(at.value(["tbl", "a", "b", "c", 1, 1])).toEqual({ line: 5, col: 17 });
    expect(at.key(["tbl", "a", "b", "c", 2, "x"])).toEqual({ line: 5, col: 23 });
  });

  it("does not mistake the content of a multi-line string for keys", () => {
    expect(at.key(["tbl", "key"])).toEqual({ line: 3, col: 1 });
  });

  it("numbers arrays of tables", () => {
    expect(at.key(["arr", 1])).toEqual({ line: 11, col: 1 });
    expect(at.value(["arr", 1, "v"])).toEqual({ line: 12, col: 5 });
    expect(at.value(["arr", 0, "v"])).toEqual({ line: 10, col: 5 });
  });

  it("falls back to the enclosing table, then 1:1", () => {
    expect(at.key(["tbl", "sub", "missing"])).toEqual({ line: 13, col: 1 });
    expect(at.key(["nowhere", "x"])).toEqual({ line: 1, col: 1 });
  });
});
