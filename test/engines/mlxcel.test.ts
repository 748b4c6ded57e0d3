/**
 * mlxcel cannot run here: what a definition may pass it is checked against its documented flags.
 * `--api-prefix` prefixes every route of the coordinator, `/health` included, so launch would wait
 * on a `/health` that answers 404 and health would call a loaded coordinator down.
 */
import { describe, expect, it } from "vitest";
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
