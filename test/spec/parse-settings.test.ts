import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isShardctlError } from "../../src/errors/index.js";
import { formatIssue, loadSettings, parseSettings, SpecError } from "../../src/spec/index.js";
import { repoRoot } from "./support.js";

describe("parseSettings", () => {
  it("fills every default from an empty file", () => {
    const result = parseSettings("", "/etc/shardctl/shardctl.toml");
    expect(result).toEqual({
      ok: true,
      issues: [],
      value: {
        file: "/etc/shardctl/shardctl.toml",
        dir: "/etc/shardctl",
        distributed: { enabled: false, transportBackend: "tcp", portRange: { first: 39600, last: 39629 } },
        hub: { endpoint: "https://huggingface.co", tokenEnv: "HF_TOKEN" },
        router: { kind: "none", embedded: false, weight: 1, upstreamIdleSeconds: 600 },
        daemon: { resyncSeconds: 30, heartbeatSeconds: 5, restartBudget: 3, restartBudgetResetSeconds: 600, allowMassPrune: false, stateDir: "/etc/shardctl/.shardctl" },
        ssh: {},
        nodes: {},
      },
    });
  });

  it("normalises nodes: names included, sizes in bytes, local paths resolved, remote paths as written", () => {
    const result = parseSettings(
      [
        "[nodes.studio-1]",
        'host = "10.0.0.1"',
        'user = "ops"',
        "port = 2222",
        'identity_file = "keys/id_ed25519"',
        'host_key_policy = "accept-new"',
        'model_dir = "~/models"',
        'memory = "64GiB"',
        'memory_limit = "48GB"',
        'accelerator = "apple-silicon"',
        'engine_version = "0.9.1"',
        "[nodes.here]",
        'host = "local"',
        'model_dir = "data/here"',
        "memory = 1024",
      ].join("\n"),
      "/srv/ops/shardctl.toml",
    );
    expect(result.ok && result.value.nodes).toEqual({
      "studio-1": {
        name: "studio-1",
        host: "10.0.0.1",
        local: false,
        user: "ops",
        port: 2222,
        identityFile: "/srv/ops/keys/id_ed25519",
        hostKeyPolicy: "accept-new",
        modelDir: "~/models",
        memory: 64 * 2 ** 30,
        memoryLimit: 48e9,
        accelerator: "apple-silicon",
        engineVersion: "0.9.1",
      },
      here: { name: "here", host: "local", local: true, port: 22, hostKeyPolicy: "strict", modelDir: "/srv/ops/data/here", memory: 1024 },
    });
  });

  it("reads the shipped example", async () => {
    const settings = await loadSettings(join(repoRoot, "shardctl.toml"));
    expect(settings.distributed.enabled).toBe(true);
    expect(settings.router).toMatchObject({ kind: "continuum", embedded: true, config: join(repoRoot, ".demo/router.yaml") });
    expect(Object.keys(settings.nodes)).toEqual(["demo-1", "demo-2"]);
    expect(settings.nodes["demo-1"]).toMatchObject({ local: true, modelDir: join(repoRoot, ".demo/nodes/demo-1"), memory: 2 ** 31, accelerator: "cpu" });
    expect(Object.isFrozen(settings.nodes["demo-1"])).toBe(true);
  });

  it("reports a node with a refused name together with the problems of its entry", () => {
    const result = parseSettings('[nodes.Bad_1]\nhost = "-x"\n', "s.toml");
    expect(result.issues.map(formatIssue)).toEqual([
      "s.toml:1:1: nodes.Bad_1: key \"Bad_1\" is not allowed: expected lowercase letters, digits and '-', starting with a letter or digit",
      "s.toml:1:1: nodes.Bad_1.model_dir: is required",
      "s.toml:2:8: nodes.Bad_1.host: \"-x\" is not allowed: expected \"local\", a hostname or ssh alias, or an IP address (letters, digits, '.', '-', '_'; ':' only in an IPv6 address, unbracketed; no user@ or :port, which have keys of their own)",
    ]);
  });

  it("refuses an admin_url beside the embedded router, which never sees what an admin API registers", () => {
    const result = parseSettings(
      `[router]\nkind = "continuum"\nconfig = "router.yaml"\nembedded = true\nadmin_url = "http://127.0.0.1:8089"\n`,
      "/srv/ops/shardctl.toml",
    );
    expect(result.ok).toBe(false);
    const lines = result.ok ? [] : result.issues.map(formatIssue);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain("router.admin_url");
    expect(lines[0]).toContain("cannot be set with router.embedded = true");
    expect(parseSettings(`[router]\nkind = "continuum"\nconfig = "router.yaml"\nadmin_url = "http://127.0.0.1:8089"\n`, "/srv/ops/shardctl.toml").ok).toBe(true);
  });

  it("reports a TOML syntax error at smol-toml's position", () => {
    const result = parseSettings("[distributed]\nenabled = tru\n", "s.toml");
    expect(result.ok).toBe(false);
    expect(result.issues).toHaveLength(1);
    expect(result.issues[0]).toMatchObject({ file: "s.toml", line: 2, path: "" });
    expect(result.issues[0]?.message).toMatch(/^invalid TOML: /);
  });
});

describe("loadSettings", () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "shardctl-settings-"));
    await writeFile(join(dir, "bad.toml"), '[distributed]\nenabled = "yes"\nbogus = 1\n');
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("throws InvalidSettings listing every formatted issue and carrying them", async () => {
    const file = join(dir, "bad.toml");
    const error = await loadSettings(file).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(SpecError);
    expect(isShardctlError(error, "InvalidSettings")).toBe(true);
    const spec = error as SpecError;
    expect(spec.terminal).toBe(true);
    expect(spec.message).toBe(
      [
        `${file}:2:11: distributed.enabled: expected a boolean (true or false), got "yes"`,
        `${file}:3:1: distributed.bogus: unknown key (allowed: enabled, transport_backend, port_range)`,
      ].join("\n"),
    );
    expect(spec.issues).toHaveLength(2);
  });

  it("throws SettingsNotFound for a missing file", async () => {
    const error = await loadSettings(join(dir, "none.toml")).catch((e: unknown) => e);
    expect(isShardctlError(error, "SettingsNotFound")).toBe(true);
  });
});

describe("[ssh]", () => {
  it("resolves known_hosts and config against the settings directory", () => {
    const result = parseSettings('[ssh]\nknown_hosts = "keys/known_hosts"\nconfig = "/etc/ssh/ssh_config"\n', "/srv/ops/shardctl.toml");
    expect(result.ok && result.value.ssh).toEqual({ knownHosts: "/srv/ops/keys/known_hosts", config: "/etc/ssh/ssh_config" });
  });
});
