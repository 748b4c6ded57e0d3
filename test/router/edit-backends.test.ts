import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { editBackendsText, removeBackend, upsertBackend } from "../../src/router/edit-backends.js";

const entry = { name: "c1", url: "http://127.0.0.1:9100", models: ["m"] };

describe("editBackendsText", () => {
  it("changes only the fields that differ in an existing entry, adding and dropping weight in place", () => {
    const text = `backends:\n  - name: c1      # ours\n    url:   'http://old:1'   # spaced\n    models: [ m ]\n    extra: keep\n`;
    const weighted = editBackendsText(text, (doc) => upsertBackend(doc, { ...entry, weight: 3 }));
    expect(weighted).toBe(`backends:\n  - name: c1      # ours\n    url:   "http://127.0.0.1:9100"   # spaced\n    models: [ m ]\n    extra: keep\n    weight: 3\n`);
    const unweighted = editBackendsText(weighted, (doc) => upsertBackend(doc, entry));
    expect(unweighted).toBe(`backends:\n  - name: c1      # ours\n    url:   "http://127.0.0.1:9100"   # spaced\n    models: [ m ]\n    extra: keep\n`);
  });

  it("returns the very same text when nothing changes", () => {
    const text = `backends:\n  - {name: c1, url: "http://127.0.0.1:9100", models: [m]}\n`;
    expect(editBackendsText(text, (doc) => upsertBackend(doc, entry))).toBe(text);
    expect(editBackendsText(text, (doc) => void removeBackend(doc, "other"))).toBe(text);
  });

  it("falls back to re-serialising a flow-style list, keeping its meaning and comments", () => {
    const text = `# top\nbackends: [{name: a, url: "http://h:1", models: [x]}]  # flow\nother: 1\n`;
    const next = editBackendsText(text, (doc) => upsertBackend(doc, entry));
    expect(parse(next)).toEqual({ backends: [{ name: "a", url: "http://h:1", models: ["x"] }, { ...entry }], other: 1 });
    expect(next).toContain("# top");
    expect(next).toContain("# flow");
  });

  it("appends a backends list to a file without one, and to a comment-only file", () => {
    expect(editBackendsText("server:\n  bind_address: 127.0.0.1:8080\n", (doc) => upsertBackend(doc, entry))).toBe(
      `server:\n  bind_address: 127.0.0.1:8080\nbackends:\n  - name: "c1"\n    url: "http://127.0.0.1:9100"\n    models: ["m"]\n`,
    );
    const fromComment = editBackendsText("# nothing yet\n", (doc) => upsertBackend(doc, entry));
    expect(fromComment.startsWith("# nothing yet\n")).toBe(true);
    expect(parse(fromComment)).toEqual({ backends: [entry] });
  });

  it("turns the list back into [] when its last entry goes, keeping the key line's comment", () => {
    const text = `backends:   # managed\n  - name: c1\n    url: http://h:1\n    models: [m]\nafter: 1\n`;
    expect(editBackendsText(text, (doc) => void removeBackend(doc, "c1"))).toBe(`backends: []   # managed\nafter: 1\n`);
  });
});
