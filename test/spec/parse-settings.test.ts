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
        daemon: {
          resyncSeconds: 30,
          heartbeatSeconds: 5,
          restartBudget: 3,
          restartBudgetResetSeconds: 600,
          cutOffGraceSeconds: 300,
          allowMassPrune: false,
          stateDir: "/etc/shardctl/.shardctl",
        },
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
      here: { name: "here", host: "local", local: true, hostKeyPolicy: "strict", modelDir: "/srv/ops/data/here", memory: 1024 },
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

  it("says what is wrong with a host that can never work and what to write, at its place", () => {
    const said = (host: string): string => {
      const result = parseSettings(`[nodes.n1]\nhost = ${JSON.stringify(host)}\nmodel_dir = "/m"\n`, "s.toml");
      return result.ok ? "ok" : result.issues.map(formatIssue).join(" | ");
    };
    for (const host of ["fd42:a5a::11", "FD42:0A5A:0000:0000:0000:0000:0000:0011", "2001:db8::1", "n1.lab", "10.0.0.5", "local"]) expect(said(host), host).toBe("ok");
    expect(said("fd42:a5a::11:42022")).toBe(
      's.toml:2:8: nodes.n1.host: "fd42:a5a::11:42022" is not an IPv6 address: it ends in a port? Write host = "fd42:a5a::11" and port = 42022',
    );
    for (const host of [":::", "1:2", "fd42::1::2"]) {
      expect(said(host)).toBe(`s.toml:2:8: nodes.n1.host: "${host}" is not an IPv6 address: a host with ':' must be a whole IPv6 address, unbracketed, e.g. fd00::11`);
    }
    expect(said("::ffff:127.0.40.12")).toBe('s.toml:2:8: nodes.n1.host: "::ffff:127.0.40.12" is an IPv4 address written as IPv6: write "127.0.40.12"');
    expect(said("::FFFF:7f00:1")).toBe('s.toml:2:8: nodes.n1.host: "::FFFF:7f00:1" is an IPv4 address written as IPv6: write "127.0.0.1"');
    expect(said("fe80::1")).toMatch(
      /^s\.toml:2:8: nodes\.n1\.host: "fe80::1" is a link-local address: it needs a zone .* give the node a ULA \(fd00::\/8\), global or IPv4 address$/,
    );
    expect(said("fe80::1%eth0")).toMatch(
      /^s\.toml:2:8: nodes\.n1\.host: "fe80::1%eth0" is not allowed: it has a zone \(%eth0\), an interface of one machine, .* IPv4 address$/,
    );
    expect(said("[fd42::1]:22")).toBe('s.toml:2:8: nodes.n1.host: "[fd42::1]:22" is not allowed: write an IPv6 address without brackets, and the SSH port as port = …');
    expect(said("root@n1")).toBe('s.toml:2:8: nodes.n1.host: "root@n1" is not allowed: no "user@" in a host: the login name has its own key, user = …');
    expect(said("n1.lab:2222")).toBe('s.toml:2:8: nodes.n1.host: "n1.lab:2222" is not allowed: no ":port" in a host: the SSH port has its own key, port = …');
    expect(said("n1.lab.")).toBe('s.toml:2:8: nodes.n1.host: "n1.lab." is not allowed: drop the trailing dot: write "n1.lab"');
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
