import { describe, expect, it } from "vitest";
import { computeRevision, formatIssue, parseCluster, type ClusterSpec, type Settings } from "../../src/spec/index.js";
import { settingsFrom } from "./support.js";

const registry = (studio1Host: string, unusedHost = "10.0.0.9"): string => `
[nodes.studio-1]
host = "${studio1Host}"
model_dir = "/models"

[nodes.studio-2]
host = "10.0.0.2"
model_dir = "/models"

[nodes.spare]
host = "${unusedHost}"
model_dir = "/models"
`;

const definition = 'nodes = ["studio-1", "studio-2"]\n[model]\nid = "org/model"\ncontext_length = 8192\n';

function revisionOf(text: string, settings: Settings, file = "clusters/llama.toml"): string {
  const result = parseCluster(text, file, settings);
  if (!result.ok) throw new Error(result.issues.map(formatIssue).join("\n"));
  return computeRevision(result.value as ClusterSpec, settings);
}

describe("computeRevision", () => {
  const base = settingsFrom(registry("10.0.0.1"));
  const before = revisionOf(definition, base);

  it("is a hex sha256", () => {
    expect(before).toMatch(/^[0-9a-f]{64}$/);
  });

  it("ignores whitespace, comments, key order and spelled-out defaults", () => {
    const reformatted = `# a comment\n\n[model]   # the model\ncontext_length   =   8192\nid = 'org/model'\nrevision = "main"\n\n[transport]\n\nbackend = "tcp"\n`;
    expect(revisionOf(`desired = "running"\nnodes = [\n  "studio-1",\n  "studio-2",\n]\n${reformatted}`, base)).toBe(before);
  });

  it("changes when a used node's host changes", () => {
    expect(revisionOf(definition, settingsFrom(registry("10.0.0.11")))).not.toBe(before);
  });

  it("does not change when an unused node changes", () => {
    expect(revisionOf(definition, settingsFrom(registry("10.0.0.1", "10.0.0.99")))).toBe(before);
  });

  it("changes with the definition, the stage order and the coordinator node's entry", () => {
    expect(revisionOf(definition.replace("8192", "4096"), base)).not.toBe(before);
    expect(revisionOf(definition.replace('"studio-1", "studio-2"', '"studio-2", "studio-1"'), base)).not.toBe(before);
    const withSpare = `${definition}[coordinator]\nnode = "spare"\n`;
    expect(revisionOf(withSpare, settingsFrom(registry("10.0.0.1", "10.0.0.99")))).not.toBe(revisionOf(withSpare, base));
  });

  it("changes when a default inherited from the settings changes", () => {
    const tb = settingsFrom(`[distributed]\ntransport_backend = "thunderbolt"\n${registry("10.0.0.1")}`);
    expect(revisionOf(definition, tb)).not.toBe(before);
  });

  it("is the same for two checkouts of the same files in different directories", () => {
    const local = (dir: string): Settings =>
      settingsFrom('[nodes.a]\nhost = "local"\nmodel_dir = "nodes/a"\n[nodes.b]\nhost = "local"\nmodel_dir = "nodes/b"\n', `${dir}/shardctl.toml`);
    const text = 'nodes = ["a", "b"]\n[model]\nid = "models/m"\nsource = "push"\n';
    expect(revisionOf(text, local("/home/ci/checkout-1"))).toBe(revisionOf(text, local("/tmp/checkout-2")));
  });
});
