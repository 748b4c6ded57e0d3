/**
 * mlxcel cannot run here: what a definition may pass it is checked against its documented flags,
 * and its cluster TOML against the format it parses. `--api-prefix` prefixes every route of the
 * coordinator, `/health` included, so launch would wait on a `/health` that answers 404 and health
 * would call a loaded coordinator down. An address is a Rust socket address: IPv6 in brackets.
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parse as parseToml } from "smol-toml";
import { describe, expect, it } from "vitest";
import { readClusterConfig } from "../../src/engine/config/cluster-toml.js";
import { createDriver, type EngineTopology } from "../../src/engines/index.js";
import { formatIssue, parseCluster, parseSettings } from "../../src/spec/index.js";

const settings = parseSettings(
  '[nodes.a]\nhost = "10.0.0.1"\nmodel_dir = "/m"\naccelerator = "cuda"\n[nodes.b]\nhost = "10.0.0.2"\nmodel_dir = "/m"\naccelerator = "cuda"\n',
  "shardctl.toml",
);
if (!settings.ok) throw new Error(settings.issues.map(formatIssue).join("\n"));
const parse = (kind: string, extraArgs: string) =>
  parseCluster(`nodes = ["a", "b"]\n[model]\nid = "/m"\nsource = "path"\n[engine]\nkind = "${kind}"\nextra_args = ${extraArgs}\n`, "clusters/x.toml", settings.value);

describe("[engine] extra_args for mlxcel", () => {
  it.each([['["--api-prefix", "/v2"]'], ['["--api-prefix=/v2"]']])("refuses --api-prefix (%s): launch and the router call unprefixed routes", (args) => {
    const result = parse("mlxcel", args);
    expect(result.ok).toBe(false);
    expect(result.ok ? [] : result.issues.map(formatIssue)).toEqual([
      expect.stringMatching(/engine\.extra_args\[0\]: "--api-prefix(=\/v2)?" is refused: --api-prefix moves every route \(\/health, \/v1\/completions\)/),
    ]);
  });

  it("still accepts an mlxcel flag that leaves the routes alone", () => {
    expect(parse("mlxcel", '["--max-kv-size", "8192"]').ok).toBe(true);
  });
});

describe("the cluster TOML of a cluster on IPv6 addresses", () => {
  const v6: EngineTopology = {
    cluster: "v6",
    modelName: "m",
    maxSequences: 1,
    transport: "tcp",
    coordinator: { id: "coordinator", address: { host: "::1", port: 39600 }, http: { host: "::1", port: 8080 } },
    stages: [
      { index: 0, id: "stage-0", address: { host: "fd00::2", port: 39601 }, layers: [0, 2] },
      { index: 1, id: "stage-1", address: { host: "10.0.0.3", port: 39602 }, layers: [2, 4] },
    ],
    explicitLayers: false,
  };

  it("writes each address as a socket address, IPv6 in brackets, as mlxcel's SocketAddr parses it", () => {
    const toml = parseToml(createDriver("mlxcel", { extraArgs: [] }).renderClusterConfig(v6)) as { nodes: Array<{ address: string }> };
    expect(toml.nodes.map((n) => n.address)).toEqual(["[::1]:39600", "[fd00::2]:39601", "10.0.0.3:39602"]);
  });

  it("is read back by shard-engine (which reads mlxcel's format) with the addresses it was given", async () => {
    const dir = await mkdtemp(join(tmpdir(), "shardctl-v6-toml-"));
    try {
      const file = join(dir, "cluster.toml");
      await writeFile(file, createDriver("reference", { extraArgs: [] }).renderClusterConfig(v6));
      const config = readClusterConfig(file);
      expect([config.coordinator, ...config.stages].map((n) => `${n.host} ${n.port}`)).toEqual(["::1 39600", "fd00::2 39601", "10.0.0.3 39602"]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
