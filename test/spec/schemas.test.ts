import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { Ajv2020 } from "ajv/dist/2020.js";
import { parse } from "smol-toml";
import { describe, expect, it } from "vitest";
import { renderSchemas } from "../../src/spec/index.js";
import { repoRoot } from "./support.js";

const schemasDir = join(repoRoot, "schemas");
const committed = (name: string): unknown => JSON.parse(readFileSync(join(schemasDir, name), "utf8"));

describe("schemas/*.schema.json", () => {
  it.each(Object.entries(renderSchemas()))("%s is up to date with the zod schema (regenerate with writeSchemas)", (name, text) => {
    expect(readFileSync(join(schemasDir, name), "utf8")).toBe(text);
  });
});

describe("examples validate against the committed schemas", () => {
  const ajv = new Ajv2020({ strict: true, allErrors: true });
  const validateCluster = ajv.compile(committed("cluster.schema.json") as object);
  const validateSettings = ajv.compile(committed("settings.schema.json") as object);
  const clusterExamples = [
    ...readdirSync(join(repoRoot, "clusters"))
      .filter((f) => f.endsWith(".toml"))
      .map((f) => join("clusters", f)),
    ...readdirSync(join(repoRoot, "docs/examples"))
      .filter((f) => f.endsWith(".toml"))
      .map((f) => join("docs/examples", f)),
  ];

  it("has examples to check", () => {
    expect(clusterExamples).toContain("clusters/demo.toml");
    expect(clusterExamples).toContain("docs/examples/llama-70b.toml");
  });

  it.each(clusterExamples)("%s", (file) => {
    const text = readFileSync(join(repoRoot, file), "utf8");
    const directive = file.startsWith("clusters/") ? "#:schema ../schemas/cluster.schema.json" : "#:schema ../../schemas/cluster.schema.json";
    expect(text.split("\n", 1)[0]).toBe(directive);
    expect(validateCluster(parse(text)), JSON.stringify(validateCluster.errors)).toBe(true);
  });

  it("shardctl.toml", () => {
    const text = readFileSync(join(repoRoot, "shardctl.toml"), "utf8");
    expect(text.split("\n", 1)[0]).toBe("#:schema ./schemas/settings.schema.json");
    expect(validateSettings(parse(text)), JSON.stringify(validateSettings.errors)).toBe(true);
  });

  it("rejects what the zod schema rejects: unknown keys, hostile strings, bad enums", () => {
    expect(validateCluster({ nodes: ["a"], model: { id: "o/m" }, extra: 1 })).toBe(false);
    expect(validateCluster({ nodes: ["a"], model: { id: "x; rm -rf ~" } })).toBe(false);
    expect(validateCluster({ nodes: ["a"], model: { id: "../../etc" } })).toBe(false);
    expect(validateCluster({ nodes: ["a"], model: { id: "o/m" }, desired: "runing" })).toBe(false);
    expect(validateCluster({ nodes: ["a"], model: { id: "o/m" } })).toBe(true);
    expect(validateSettings({ nodes: { "Bad Name": { host: "local", model_dir: "m" } } })).toBe(false);
    expect(validateSettings({ nodes: { ok: { host: "local" } } })).toBe(false);
    expect(validateSettings({ nodes: { ok: { host: "local", model_dir: "m", memory: "2GiB" } } })).toBe(true);
  });
});
