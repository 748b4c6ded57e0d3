import { mkdtemp, rm, writeFile, mkdir, symlink } from "node:fs/promises";
import { homedir, tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { findClusterFiles, formatIssue, loadCluster, loadSettings, parseCluster, type ClusterSpec } from "../../src/spec/index.js";
import { fixtureSettings, repoRoot, settingsFrom } from "./support.js";

const registry = `
[distributed]
transport_backend = "thunderbolt"
port_range = "40000-40009"

[router]
weight = 3

[nodes.studio-1]
host = "10.0.0.1"
model_dir = "/Volumes/models"

[nodes.studio-2]
host = "studio-2.local"
model_dir = "~/models"
`;

function parseOk(text: string, file: string, settingsText = registry): ClusterSpec {
  const result = parseCluster(text, file, settingsFrom(settingsText));
  if (!result.ok) throw new Error(result.issues.map(formatIssue).join("\n"));
  return result.value;
}

function messages(text: string, file = "clusters/llama.toml"): string[] {
  const result = parseCluster(text, file, fixtureSettings());
  return result.issues.map(formatIssue);
}

describe("parseCluster: good definitions", () => {
  it("fills every default, resolving transport and router defaults from the settings and the file", () => {
    const spec = parseOk('nodes = ["studio-1", "studio-2"]\n[model]\nid = "mlx-community/Llama-3.3-70B-Instruct-4bit"\n', "clusters/llama.toml");
    expect(spec).toEqual({
      file: "clusters/llama.toml",
      name: "llama",
      desired: "running",
      suspend: false,
      nodes: ["studio-1", "studio-2"],
      model: {
        id: "mlx-community/Llama-3.3-70B-Instruct-4bit",
        revision: "main",
        source: "hub",
        contextLength: 4096,
        maxSequences: 1,
        files: "stage",
        verify: "fast",
      },
      engine: { kind: "mlxcel", extraArgs: [] },
      transport: { backend: "thunderbolt", portRange: { first: 40000, last: 40009 } },
      coordinator: { node: "local", host: "127.0.0.1", port: 8080 },
      plan: { strategy: "equal", headroom: 1.2, allowUnvalidatedFamily: false },
      router: { register: true, backend: "llama", weight: 3 },
    });
    expect(Object.isFrozen(spec)).toBe(true);
    expect(Object.isFrozen(spec.model)).toBe(true);
    expect(Object.isFrozen(spec.nodes)).toBe(true);
  });

  it("keeps explicit values over the settings' defaults", () => {
    const spec = parseOk(
      [
        'name = "big"',
        'desired = "stopped"',
        "suspend = true",
        'nodes = ["studio-2", "studio-1"]',
        "[model]",
        'id = "org/model"',
        'revision = "0123456789abcdef0123456789abcdef01234567"',
        "context_length = 8192",
        "max_sequences = 4",
        'files = "all"',
        'verify = "full"',
        "[engine]",
        'binary = "/opt/mlxcel/bin/mlxcel-server"',
        'version = "0.9.1"',
        'extra_args = ["--temp", "0.7", "--max-tokens=512"]',
        "[transport]",
        'backend = "tcp"',
        'port_range = "41000-41003"',
        "[coordinator]",
        'node = "studio-1"',
        'host = "10.0.0.1"',
        "port = 9000",
        "[plan]",
        "headroom = 1.5",
        "allow_unvalidated_family = true",
        "[router]",
        "register = false",
        'backend = "big-llama"',
        "weight = 7",
      ].join("\n"),
      "clusters/big.toml",
    );
    expect(spec.desired).toBe("stopped");
    expect(spec.suspend).toBe(true);
    expect(spec.nodes).toEqual(["studio-2", "studio-1"]);
    expect(spec.model).toMatchObject({ revision: "0123456789abcdef0123456789abcdef01234567", contextLength: 8192, maxSequences: 4, files: "all", verify: "full" });
    expect(spec.engine).toEqual({ kind: "mlxcel", binary: "/opt/mlxcel/bin/mlxcel-server", version: "0.9.1", extraArgs: ["--temp", "0.7", "--max-tokens=512"] });
    expect(spec.transport).toEqual({ backend: "tcp", portRange: { first: 41000, last: 41003 } });
    expect(spec.coordinator).toEqual({ node: "studio-1", host: "10.0.0.1", port: 9000 });
    expect(spec.plan).toEqual({ strategy: "equal", headroom: 1.5, allowUnvalidatedFamily: true });
    expect(spec.router).toEqual({ register: false, backend: "big-llama", weight: 7 });
  });

  it("resolves a relative pushed model against the settings directory and keeps ~/ for path sources", () => {
    const pushed = parseOk('nodes = ["studio-1"]\n[model]\nid = ".demo/models/x"\nsource = "push"\n', "clusters/a.toml");
    expect(pushed.model.path).toBe("/srv/ops/.demo/models/x");
    const onNodes = parseOk('nodes = ["studio-1"]\n[model]\nid = "~/models/x"\nsource = "path"\n', "clusters/a.toml");
    expect(onNodes.model.path).toBe("~/models/x");
    const pushedHome = parseOk('nodes = ["studio-1"]\n[model]\nid = "~/models/x"\nsource = "push"\n', "clusters/a.toml");
    expect(pushedHome.model.path).toBe(join(homedir(), "models/x"));
  });

  it("accepts the shipped demo definition against the shipped settings", async () => {
    const settings = await loadSettings(join(repoRoot, "shardctl.toml"));
    const result = await loadCluster(join(repoRoot, "clusters/demo.toml"), settings);
    expect(result.issues.map(formatIssue)).toEqual([]);
    expect(result.ok && result.value).toMatchObject({ name: "demo", nodes: ["demo-1", "demo-2"], engine: { kind: "reference" } });
  });
});

describe("parseCluster: documentation example", () => {
  it("docs/examples/llama-70b.toml is a valid definition for the registry it describes", async () => {
    const result = await loadCluster(join(repoRoot, "docs/examples/llama-70b.toml"), fixtureSettings());
    expect(result.issues.map(formatIssue)).toEqual([]);
    expect(result.ok && result.value).toMatchObject({ name: "llama-70b", coordinator: { node: "studio-1" }, transport: { backend: "thunderbolt" } });
  });
});

describe("parseCluster: messages", () => {
  it("names an unregistered node with file, line, column and the registered names (the issue's example)", () => {
    const text = ["# llama", "", 'desired = "running"', "", "[model]", 'id = "org/name"', "", ""].join("\n");
    expect(messages(`nodes = ["studio-1",\n         "studio-3"]\n${text}`)).toEqual([
      'clusters/llama.toml:2:10: nodes[1]: unknown node "studio-3" (registered: studio-1, studio-2)',
    ]);
  });

  it("reports every problem of a file at once, in file order", () => {
    expect(messages('nodes = ["studio-1", "nope"]\nbogus = 1\n[model]\nid = "org/name"\nsource = "ftp"\n[plan]\nheadroom = 0\n')).toEqual([
      'clusters/llama.toml:1:22: nodes[1]: unknown node "nope" (registered: studio-1, studio-2)',
      "clusters/llama.toml:2:1: bogus: unknown key (allowed: name, desired, suspend, nodes, model, engine, transport, coordinator, plan, router)",
      'clusters/llama.toml:5:10: model.source: expected one of "hub", "path", "push", got "ftp"',
      "clusters/llama.toml:7:12: plan.headroom: expected a number >= 1, got 0",
    ]);
  });

  it("says when no node is registered at all", () => {
    const result = parseCluster('nodes = ["a", "b"]\n[model]\nid = "o/m"\n', "c.toml", settingsFrom("", "/x/shardctl.toml"));
    expect(result.issues.map(formatIssue)).toEqual([
      'c.toml:1:10: nodes[0]: unknown node "a" (no nodes are registered in /x/shardctl.toml)',
      'c.toml:1:15: nodes[1]: unknown node "b" (no nodes are registered in /x/shardctl.toml)',
    ]);
  });

  it("counts the settings' port range when the definition has none", () => {
    const settings = settingsFrom(
      '[distributed]\nport_range = "40000-40001"\n[nodes.a]\nhost="local"\nmodel_dir="m/a"\n[nodes.b]\nhost="local"\nmodel_dir="m/b"\n',
      "/x/shardctl.toml",
    );
    const result = parseCluster('nodes = ["a", "b"]\n[model]\nid = "o/m"\n', "c.toml", settings);
    expect(result.issues.map(formatIssue)).toEqual([
      "c.toml:1:9: nodes: port range 40000-40001 (the default from /x/shardctl.toml) holds 2 ports; 2 stages and the coordinator need 3",
    ]);
  });
});

describe("parseCluster: hostile strings", () => {
  const hostile = ["x; rm -rf ~", "../../etc", "$(reboot)", "`id`", "a b", "a|b", "a&&b", "a>b", "'quoted'", '"dq"', "a\nb", "-oProxyCommand=sh"];
  const fields: [string, (value: string) => string][] = [
    ["model.id", (v) => `nodes = ["studio-1"]\n[model]\nid = ${JSON.stringify(v)}\nsource = "path"\n`],
    ["nodes[0]", (v) => `nodes = [${JSON.stringify(v)}]\n[model]\nid = "o/m"\n`],
    ["engine.binary", (v) => `nodes = ["studio-1"]\n[model]\nid = "o/m"\n[engine]\nbinary = ${JSON.stringify(v)}\n`],
    ["engine.extra_args[0]", (v) => `nodes = ["studio-1"]\n[model]\nid = "o/m"\n[engine]\nextra_args = [${JSON.stringify(v)}]\n`],
    ["coordinator.host", (v) => `nodes = ["studio-1"]\n[model]\nid = "o/m"\n[coordinator]\nhost = ${JSON.stringify(v)}\n`],
    ["model.revision", (v) => `nodes = ["studio-1"]\n[model]\nid = "o/m"\nrevision = ${JSON.stringify(v)}\n`],
  ];
  // "-oProxyCommand=sh" is a well-formed engine argument (argv, never a shell); it is refused where it would reach ssh.
  const cases = fields
    .flatMap(([path, make]) => hostile.map((value) => [path, value, make(value)] as const))
    .filter(([path, value]) => !(path === "engine.extra_args[0]" && value === "-oProxyCommand=sh"));

  it.each(cases)("%s refuses %j", (path, _value, text) => {
    const result = parseCluster(text, "clusters/h.toml", fixtureSettings());
    expect(result.ok).toBe(false);
    const issue = result.issues.find((i) => i.path === path);
    expect(issue?.message).toMatch(/is not allowed: expected /);
  });

  it("accepts an ordinary engine flag that merely starts with a dash", () => {
    const result = parseCluster('nodes = ["studio-1"]\n[model]\nid = "o/m"\n[engine]\nextra_args = ["-oProxyCommand=sh"]\n', "clusters/h.toml", fixtureSettings());
    expect(result.ok).toBe(true);
  });
});

describe("loadCluster and findClusterFiles", () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "shardctl-spec-"));
    await mkdir(join(dir, "nested"));
    await writeFile(join(dir, "b.toml"), 'nodes = ["studio-1"]\n[model]\nid = "o/m"\n');
    await writeFile(join(dir, "a.toml"), "");
    await writeFile(join(dir, "b.status.json"), "{}");
    await writeFile(join(dir, "nested", "c.toml"), "");
    // An editor's files beside a definition: Emacs's lock (a link to nothing) and a hidden copy.
    await symlink("someone@host.4242:1700000000", join(dir, ".#b.toml"));
    await writeFile(join(dir, ".b.toml"), "");
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("lists the *.toml of a directory, sorted, not recursive, not hidden", async () => {
    expect(await findClusterFiles(dir)).toEqual([join(dir, "a.toml"), join(dir, "b.toml")]);
  });

  it("loads a file and reports a missing one at 1:1", async () => {
    const good = await loadCluster(join(dir, "b.toml"), fixtureSettings());
    expect(good.ok && good.value.name).toBe("b");
    const missing = await loadCluster(join(dir, "gone.toml"), fixtureSettings());
    expect(missing.issues.map(formatIssue)).toEqual([`${join(dir, "gone.toml")}:1:1: file not found`]);
  });
});

describe("parseCluster: engine fit", () => {
  it("refuses mlxcel on nodes declared as something other than Apple silicon, naming them once", () => {
    const settings = settingsFrom(
      '[nodes.box-1]\nhost = "10.0.0.3"\nmodel_dir = "/models"\nmemory = "32GiB"\naccelerator = "cpu"\n[nodes.mac]\nhost = "10.0.0.4"\nmodel_dir = "/models"\naccelerator = "apple-silicon"\n',
    );
    const result = parseCluster('nodes = ["box-1", "mac"]\n[model]\nid = "org/name"\n', "clusters/x.toml", settings);
    expect(result.issues.map(formatIssue)).toEqual([
      'clusters/x.toml:1:1: engine.kind: mlxcel runs on Apple silicon or Linux CUDA only; box-1 (cpu) is declared otherwise: use kind = "reference" or "mlx-lm" or nodes with Apple silicon or Linux CUDA',
    ]);
    expect(parseCluster('nodes = ["box-1", "mac"]\n[model]\nid = "org/name"\n[engine]\nkind = "reference"\n', "clusters/x.toml", settings).ok).toBe(true);
  });
});
