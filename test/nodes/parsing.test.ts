import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { NodePool, quoteArg, quoteArgv } from "../../src/nodes/index.js";
import { globMatch, knownHostsName, knownHostsNames, matchesHost, parseKnownHosts, verifyHostKey } from "../../src/nodes/ssh/known-hosts.js";
import { resolveSshConfig } from "../../src/nodes/ssh/ssh-config.js";

describe("quoteArg", () => {
  it("leaves safe words bare and single-quotes everything else", () => {
    expect(quoteArgv(["ls", "-la", "/tmp/a_b.c"])).toBe("ls -la /tmp/a_b.c");
    expect(quoteArg("it's")).toBe(`'it'\\''s'`);
    expect(quoteArg("")).toBe("''");
    expect(quoteArg("$(x)")).toBe("'$(x)'");
    // zsh expands a leading `=` (=ls → /bin/ls): never bare.
    expect(quoteArg("=ls")).toBe("'=ls'");
    expect(quoteArg("a=b")).toBe("a=b");
  });

  it("refuses NUL, which no shell argument can carry", () => {
    expect(() => quoteArg("a\0b")).toThrow(/NUL/);
  });
});

describe("known_hosts parsing", () => {
  const text = [
    "# comment",
    "@cert-authority *.example ssh-ed25519 AAAACA",
    "@revoked * ssh-ed25519 REVOKED",
    "host-a,!bad-a,10.0.0.* ssh-ed25519 KEYA comment here",
    "[10.0.0.5]:2222 ssh-rsa KEYRSA",
    "malformed-line",
  ].join("\n");
  const entries = parseKnownHosts(text);

  it("reads markers, patterns, negation and port forms", () => {
    expect(entries.map((e) => [e.marker, e.patterns])).toEqual([
      ["cert-authority", "*.example"],
      ["revoked", "*"],
      [undefined, "host-a,!bad-a,10.0.0.*"],
      [undefined, "[10.0.0.5]:2222"],
    ]);
    expect(matchesHost("host-a,!bad-a,10.0.0.*", "10.0.0.9")).toBe(true);
    expect(matchesHost("bad-*,!bad-a", "bad-a")).toBe(false);
    expect(globMatch("10.0.0.?", "10.0.0.12")).toBe(false);
  });

  it("gives known, changed, unknown and revoked verdicts", () => {
    expect(verifyHostKey(entries, "host-a", "ssh-ed25519", "KEYA")).toEqual({ kind: "known" });
    expect(verifyHostKey(entries, "host-a", "ssh-ed25519", "OTHER")).toMatchObject({ kind: "changed", line: 4 });
    expect(verifyHostKey(entries, "[10.0.0.5]:2222", "ssh-ed25519", "KEYA")).toEqual({ kind: "other-types", knownTypes: ["ssh-rsa"] });
    // 10.0.0.5 (port 22) is known through 10.0.0.* with an ed25519 key: an RSA key offered for it
    // is not a new host's key, so accept-new must not record it.
    expect(verifyHostKey(entries, "10.0.0.5", "ssh-rsa", "KEYRSA")).toEqual({ kind: "other-types", knownTypes: ["ssh-ed25519"] });
    expect(verifyHostKey(entries, "192.0.2.1", "ssh-rsa", "KEYRSA")).toEqual({ kind: "unknown" });
    expect(verifyHostKey(entries, "anything", "ssh-ed25519", "REVOKED")).toMatchObject({ kind: "revoked", line: 3 });
  });

  it("looks an IPv6 address up in the form ssh-keyscan records it, however the settings spell it", () => {
    const recorded = parseKnownHosts("[fd42:a5a::11]:42022 ssh-ed25519 KEY6\nfd42:a5a::12 ssh-ed25519 KEY7\n");
    for (const spelling of ["FD42:0A5A:0000:0000:0000:0000:0000:0011", "fd42:a5a:0:0::11", "fd42:a5a::11"]) {
      expect(knownHostsName(spelling, 42022)).toBe("[fd42:a5a::11]:42022");
      expect(verifyHostKey(recorded, knownHostsName(spelling, 42022), "ssh-ed25519", "KEY6")).toEqual({ kind: "known" });
    }
    expect(verifyHostKey(recorded, knownHostsName("FD42:A5A::0012", 22), "ssh-ed25519", "KEY7")).toEqual({ kind: "known" });
    expect(knownHostsName("Studio.Lab", 22)).toBe("Studio.Lab");
  });

  it("writes an IPv4-mapped address as ssh-keyscan does (dotted), and finds a host recorded under the spelling earlier versions wrote", () => {
    // As `ssh-keyscan -p 44022 ::ffff:7f00:2a01` records it.
    const scanned = parseKnownHosts("[::ffff:127.0.42.1]:44022 ssh-ed25519 KEYM\n");
    for (const spelling of ["::ffff:7f00:2a01", "::FFFF:127.0.42.1", "::ffff:127.0.42.1"]) {
      expect(knownHostsName(spelling, 44022)).toBe("[::ffff:127.0.42.1]:44022");
      expect(verifyHostKey(scanned, knownHostsNames(spelling, 44022), "ssh-ed25519", "KEYM")).toEqual({ kind: "known" });
    }
    // accept-new of an earlier version recorded the host as the settings spelled it.
    const earlier = parseKnownHosts("[FD00:0::11]:2222 ssh-ed25519 KEYE\n");
    expect(knownHostsNames("FD00:0::11", 2222)).toEqual(["[fd00::11]:2222", "[FD00:0::11]:2222"]);
    expect(verifyHostKey(earlier, knownHostsNames("FD00:0::11", 2222), "ssh-ed25519", "KEYE")).toEqual({ kind: "known" });
    expect(verifyHostKey(earlier, knownHostsNames("FD00:0::11", 2222), "ssh-ed25519", "OTHER")).toMatchObject({ kind: "changed" });
  });
});

describe("ssh config", () => {
  it("takes the first value per keyword from matching Host blocks, skipping Match", async () => {
    const config = await resolveSshConfig(
      ["Host box", "  HostName 10.1.1.1", "  Port=2200", "Match user x", "  User wrong", "Host *", "  User fallback", "  Port 22", '  IdentityFile "~/.ssh/k"'].join(
        "\n",
      ),
      "box",
    );
    expect(config).toMatchObject({ hostName: "10.1.1.1", port: 2200, user: "fallback" });
    expect(config.identityFiles[0]).toMatch(/\/\.ssh\/k$/);
    expect(await resolveSshConfig("Host other\n  HostName x\n", "box")).toEqual({ identityFiles: [] });
  });

  it("expands %h and %% in a HostName as OpenSSH does (%% is how a zone is written there)", async () => {
    expect((await resolveSshConfig("Host box\n  HostName %h.lab\n", "box")).hostName).toBe("box.lab");
    expect((await resolveSshConfig("Host box\n  HostName fe80::1%%eth0\n", "box")).hostName).toBe("fe80::1%eth0");
  });

  it("reports a ProxyJump or ProxyCommand that applies, and none that is 'none'", async () => {
    expect((await resolveSshConfig("Host box\n  ProxyJump bastion\n  ProxyCommand nc %h %p\n", "box")).proxy).toEqual({ keyword: "ProxyJump", value: "bastion" });
    expect((await resolveSshConfig("Host *\n  ProxyCommand ssh -W %h:%p gate\n", "box")).proxy).toEqual({ keyword: "ProxyCommand", value: "ssh -W %h:%p gate" });
    expect((await resolveSshConfig("Host box\n  ProxyJump none\nHost *\n  ProxyJump bastion\n", "box")).proxy).toBeUndefined();
    expect((await resolveSshConfig("Host other\n  ProxyJump bastion\n", "box")).proxy).toBeUndefined();
  });

  it("follows Include: wildcards in sorted order, conditional inside a Host block, a Host line of the included file not closing the includer's block", async () => {
    const dir = await mkdtemp(join(tmpdir(), "shardctl-ssh-include-"));
    try {
      await mkdir(join(dir, "conf.d"));
      await writeFile(join(dir, "conf.d", "10-box.conf"), "Host box\n  HostName 10.0.0.5\nHost elsewhere\n  User nobody\n");
      await writeFile(join(dir, "conf.d", "20-more.conf"), "Host box\n  HostName 10.9.9.9\n  Port 2222\n");
      await writeFile(join(dir, "only-other"), "User other-user\n");
      await writeFile(join(dir, "closes"), "Host elsewhere\n  User wrong\n");
      const text = [
        `Include ${dir}/conf.d/*.conf`,
        "Host other",
        `  Include ${dir}/only-other`,
        "Host box",
        `  Include ${dir}/missing-file ${dir}/closes`,
        "  User ops",
      ].join("\n");
      expect(await resolveSshConfig(text, "box")).toMatchObject({ hostName: "10.0.0.5", port: 2222, user: "ops" });
      expect((await resolveSshConfig(text, "other")).user).toBe("other-user");
      // A wildcard in a folder's name too, and names matched case by case, as glob(3) does.
      await mkdir(join(dir, "hosts", "lab"), { recursive: true });
      await mkdir(join(dir, "hosts", "Other"), { recursive: true });
      await writeFile(join(dir, "hosts", "lab", "config"), "Host gpu\n  HostName 10.1.2.3\n");
      await writeFile(join(dir, "hosts", "Other", "config"), "Host gpu\n  HostName 10.9.9.9\n  User other\n");
      expect(await resolveSshConfig(`Include ${dir}/hosts/*/config`, "gpu")).toMatchObject({ hostName: "10.9.9.9", user: "other" });
      expect(await resolveSshConfig(`Include ${dir}/hosts/l*/config`, "gpu")).toEqual({ identityFiles: [], hostName: "10.1.2.3" });
      expect(await resolveSshConfig(`Include ${dir}/hosts/L*/config`, "gpu")).toEqual({ identityFiles: [] });
      await writeFile(join(dir, "loop"), `Include ${dir}/loop\n`);
      await expect(resolveSshConfig(`Include ${dir}/loop`, "box")).rejects.toThrow(/nested more than 16 levels/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("a node whose alias goes through a proxy fails naming the config, the proxy and what to do, before connecting", async () => {
    const dir = await mkdtemp(join(tmpdir(), "shardctl-ssh-config-"));
    try {
      const config = join(dir, "config");
      await writeFile(config, "Host gpu-box\n  HostName 127.0.0.9\n  ProxyJump me@bastion.example\n");
      const pool = new NodePool({ knownHostsPath: join(dir, "known_hosts"), sshConfigPath: config });
      const node = pool.get({ name: "gpu", host: "gpu-box", modelDir: "/models" });
      const error = await node.run(["true"]).then(
        () => undefined,
        (e: Error & { reason?: string; terminal?: boolean }) => e,
      );
      await pool.close();
      expect(error?.reason).toBe("SshConfigUnsupported");
      expect(error?.terminal).toBe(true);
      expect(error?.message).toContain(`${config} reaches gpu-box through ProxyJump me@bastion.example`);
      expect(error?.message).toContain("[nodes.gpu]");
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
