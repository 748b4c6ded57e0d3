/**
 * TOML syntax errors are reported at the construct that is wrong. Regression: smol-toml stops where
 * it cannot go on, so an array left open was reported at the next table header, two lines below,
 * and a string left open at the end of its line.
 */
import { describe, expect, it } from "vitest";
import { formatIssue, parseCluster, parseSettings } from "../../src/spec/index.js";
import { fixtureSettings } from "./support.js";

const settings = fixtureSettings();

/** The one issue of an invalid definition, formatted. */
function issueOf(text: string): string {
  const result = parseCluster(text, "c.toml", settings);
  expect(result.ok).toBe(false);
  expect(result.issues).toHaveLength(1);
  return formatIssue(result.issues[0]!);
}

describe("a TOML syntax error is reported where it is", () => {
  it.each([
    [
      "an array left open before a table header: at its '['",
      'desired = "running"\nnodes = ["studio-1", "studio-2"\n\n[model]\nid = "org/name"\n',
      'c.toml:2:9: invalid TOML: unclosed array: this "[" has no matching "]"',
    ],
    [
      "a multi-line array left open before a key: at its '['",
      'nodes = [\n  "studio-1",\n  "studio-2"\ndesired = "running"\n',
      'c.toml:1:9: invalid TOML: unclosed array: this "[" has no matching "]"',
    ],
    ["an array left open at the end of the file", 'nodes = ["studio-1", "studio-2"\n', 'c.toml:1:9: invalid TOML: unclosed array: this "[" has no matching "]"'],
    [
      "an inner array left open inside an inline table: at the inner '['",
      'model = { id = "org/name", extra = ["a" }\n',
      'c.toml:1:36: invalid TOML: unclosed array: this "[" has no matching "]"',
    ],
    [
      "an inline table left open before a table header: at its '{'",
      'nodes = ["studio-1", "studio-2"]\nmodel = { id = "org/name", source = "hub"\n\n[engine]\nkind = "reference"\n',
      'c.toml:2:9: invalid TOML: unclosed inline table: this "{" has no matching "}"',
    ],
    ["an inline table left open at the end of the file", 'model = { id = "org/name"', 'c.toml:1:9: invalid TOML: unclosed inline table: this "{" has no matching "}"'],
    ["a missing '=': where it belongs", 'nodes = ["studio-1", "studio-2"]\ndesired "running"\n', 'c.toml:2:9: invalid TOML: expected "=" after the key "desired"'],
    ["a key alone on its line: at its end", 'nodes = ["studio-1", "studio-2"]\ndesired\n', 'c.toml:2:8: invalid TOML: expected "=" after the key "desired"'],
    ["a missing '=' inside an inline table", "model = { id 1 }\n", 'c.toml:1:14: invalid TOML: expected "=" after the key "id"'],
    [
      "a bad escape: at its backslash",
      'nodes = ["studio-1", "studio-2"]\n[model]\nid = "C:\\models\\llama"\n',
      "c.toml:3:9: invalid TOML: unrecognised escape sequence \\m (write \\\\ for a backslash, or use a 'literal string')",
    ],
    [
      "a bad unicode escape: at its backslash",
      'nodes = ["studio-1", "studio-2"]\n[model]\nid = "x\\uZZZZ"\n',
      "c.toml:3:8: invalid TOML: invalid non-hex character in unicode escape \\uZZZZ (write \\\\ for a backslash, or use a 'literal string')",
    ],
    [
      "a string left open: at its opening quote",
      'desired = "running\nnodes = ["studio-1", "studio-2"]\n',
      "c.toml:1:11: invalid TOML: unclosed string: no closing quote before the end of the line",
    ],
    [
      "a string left open inside an array: at its opening quote, not the array",
      'nodes = ["studio-1", "studio-2]\n[model]\nid = "org/name"\n',
      "c.toml:1:22: invalid TOML: unclosed string: no closing quote before the end of the line",
    ],
    [
      "a table header left open: at its '['",
      'nodes = ["studio-1", "studio-2"]\n[model\nid = "org/name"\n',
      'c.toml:2:1: invalid TOML: unclosed table header: expected "]" after the table name',
    ],
    [
      "a missing comma between the elements of an array: at the element after it",
      'nodes = [\n  "studio-1"\n  "studio-2"\n]\n',
      'c.toml:3:3: invalid TOML: expected "," or "]" before this',
    ],
    [
      "a merge conflict left in the file is said to be one, at its first marker",
      'nodes = ["studio-1"]\n<<<<<<< HEAD\n[router]\nweight = 2\n=======\n[router]\nweight = 3\n>>>>>>> feature\n',
      'c.toml:2:1: invalid TOML: a merge conflict is left in the file (git\'s "<<<<<<<" marker): keep one side, remove the markers, and commit',
    ],
    [
      "a line of ======= alone (a heading's underline in a string) is no merge conflict",
      'description = """\nTitle\n=======\n"""\nnodes = [\n',
      "c.toml:6:1: invalid TOML: invalid value",
    ],
    [
      "brackets inside strings and comments do not count",
      'nodes = ["[studio-1", # ]\n  "studio-2"\n\n[model]\n',
      'c.toml:1:9: invalid TOML: unclosed array: this "[" has no matching "]"',
    ],
  ])("%s", (_what, text, expected) => {
    expect(issueOf(text)).toBe(expected);
  });

  it("keeps smol-toml's position and words for the errors it already places right", () => {
    expect(issueOf('nodes = ["studio-1", "studio-2"]\nnodes = []\n')).toBe("c.toml:2:1: invalid TOML: trying to redefine an already defined table or value");
    expect(issueOf("suspend = tru\n")).toBe("c.toml:1:11: invalid TOML: invalid value");
    expect(issueOf("naïve = 1\n")).toBe("c.toml:1:3: invalid TOML: illegal character in key");
  });

  it("says a file saved as UTF-16 is not UTF-8, rather than an illegal character at 1:1", () => {
    // As a UTF-16 file with its byte-order mark reads when taken for UTF-8.
    const utf16 = new TextDecoder("utf-8").decode(Buffer.from('\ufeffnodes = ["studio-1"]\n', "utf16le"));
    expect(issueOf(utf16)).toBe("c.toml:1:1: this file is not UTF-8 (it looks like UTF-16, or holds NUL bytes): save it as UTF-8");
  });

  it("does the same for the settings file", () => {
    const result = parseSettings('[nodes.studio-1]\nhost = "10.0.0.1"\nmodel_dir = "/models"\naccelerator = ["cpu"\n\n[daemon]\n', "s.toml");
    expect(result.ok).toBe(false);
    expect(result.issues.map(formatIssue)).toEqual(['s.toml:4:15: invalid TOML: unclosed array: this "[" has no matching "]"']);
  });
});
