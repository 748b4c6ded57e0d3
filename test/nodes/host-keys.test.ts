import { randomBytes } from "node:crypto";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { probeClusterNodes } from "../../src/cluster/index.js";
import { hashHostName, knownHostsName, NodePool } from "../../src/nodes/index.js";
import { parseCluster, parseSettings } from "../../src/spec/index.js";
import { resolveTarget } from "../../src/nodes/ssh/ssh-connection.js";
import { sshNodeConfig, startSshdNodes, type SshdSet } from "../support/sshd.js";

let sshd: SshdSet;
let dir: string;
const pools: NodePool[] = [];

beforeAll(async () => {
  sshd = await startSshdNodes({ count: 2 });
  dir = await mkdtemp(join(tmpdir(), "shardctl-hostkeys-"));
});

afterAll(async () => {
  await Promise.all(pools.map((p) => p.close()));
  await sshd?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

function pool(knownHostsPath: string, sshConfigPath = join(dir, "none")): NodePool {
  const p = new NodePool({ knownHostsPath, sshConfigPath });
  pools.push(p);
  return p;
}

async function knownHosts(name: string, text: string): Promise<string> {
  const path = join(dir, name);
  await writeFile(path, text);
  return path;
}

describe("host key verification", () => {
  it("refuses an unknown host key and says how to record it", async () => {
    const path = await knownHosts("empty", "");
    const n = sshd.nodes[0]!;
    const error = await pool(path)
      .get(sshNodeConfig(sshd, 0))
      .run(["true"])
      .catch((e: unknown) => e);
    expect(error).toMatchObject({ reason: "HostKeyUnknown", terminal: true });
    expect((error as Error).message).toContain(`ssh-keyscan -p ${n.port} ${n.host} >> ${path}`);
    expect((error as Error).message).toContain('host_key_policy = "accept-new"');
    expect(await readFile(path, "utf8")).toBe("");
  });

  it("refuses a changed host key, even with accept-new", async () => {
    const n = sshd.nodes[1]!;
    const path = await knownHosts("stale", `${n.knownHostsLine}\n`);
    expect((await pool(path).get(sshNodeConfig(sshd, 1)).run(["true"])).exitCode).toBe(0);
    await n.rotateHostKey();
    for (const policy of ["strict", "accept-new"] as const) {
      const error = await pool(path)
        .get(sshNodeConfig(sshd, 1, { hostKeyPolicy: policy }))
        .run(["true"])
        .catch((e: unknown) => e);
      expect(error).toMatchObject({ reason: "HostKeyChanged", terminal: true });
      expect((error as Error).message).toContain(`ssh-keygen -R '[${n.host}]:${n.port}' -f ${path}`);
      expect((error as Error).message).toContain(`${path}:1`);
    }
  });

  // Regression: once a few attempts had failed, the reconnect back-off (up to 2 s) outlasted a 2 s
  // question, which then timed out as if the node were silent ("no connection to the node"), and a
  // teardown retried with that word for a refusal known in milliseconds.
  it("a host key changed under a running connection: every later question hears HostKeyChanged at once, not a timeout", async () => {
    const n = sshd.nodes[1]!;
    const path = await knownHosts("changes-later", `${n.knownHostsLine}\n`);
    const node = pool(path).get(sshNodeConfig(sshd, 1));
    expect((await node.run(["true"])).exitCode).toBe(0);
    await n.stop({ connections: true });
    await n.rotateHostKey();
    for (let i = 0; i < 6; i++) {
      const asked = performance.now();
      const error = await node.run(["true"], { deadlineMs: 2_000 }).then(
        (result) => result,
        (e: unknown) => e,
      );
      expect(error, `question ${i + 1}`).toMatchObject({ reason: "HostKeyChanged" });
      expect(performance.now() - asked, `question ${i + 1}`).toBeLessThan(1_500);
    }
  });

  it("asks the server for the key type known_hosts holds (a server with ed25519 and ECDSA keys, only ECDSA known)", async () => {
    const n = sshd.nodes[0]!;
    const path = await knownHosts("ecdsa-only", `[${n.host}]:${n.port} ${n.ecdsaHostKey}\n`);
    expect((await pool(path).get(sshNodeConfig(sshd, 0)).run(["echo", "ok"])).stdout).toBe("ok\n");
    // A key type ssh2 cannot verify, listed beside a usable one, is skipped rather than fatal.
    const mixed = await knownHosts(
      "with-sk",
      `[${n.host}]:${n.port} sk-ssh-ed25519@openssh.com AAAAGnNrLXNzaC1lZDI1NTE5QG9wZW5zc2guY29t\n[${n.host}]:${n.port} ${n.hostKey}\n`,
    );
    expect((await pool(mixed).get(sshNodeConfig(sshd, 0)).run(["echo", "ok"])).stdout).toBe("ok\n");
  });

  it("a host known only under other key types is not a new host: accept-new does not record a key for it", async () => {
    const n = sshd.nodes[0]!;
    // Known with an RSA key only (one the server does not have): whatever it offers is refused.
    const rsa = "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAAAgQC7";
    const path = await knownHosts("rsa-only", `[${n.host}]:${n.port} ${rsa}\n`);
    const error = await pool(path)
      .get(sshNodeConfig(sshd, 0, { hostKeyPolicy: "accept-new" }))
      .run(["true"])
      .catch((e: unknown) => e);
    expect(error).toMatchObject({ reason: "HostKeyUnknown", terminal: true });
    expect((error as Error).message).toContain("with ssh-rsa keys only");
    expect((error as Error).message).toContain('accept-new" does not apply');
    expect(await readFile(path, "utf8")).toBe(`[${n.host}]:${n.port} ${rsa}\n`);
  });

  it("accept-new records an unknown key, which strict mode then accepts", async () => {
    const n = sshd.nodes[0]!;
    const path = join(dir, "accept-new", "known_hosts");
    expect(
      (
        await pool(path)
          .get(sshNodeConfig(sshd, 0, { hostKeyPolicy: "accept-new" }))
          .run(["echo", "ok"])
      ).stdout,
    ).toBe("ok\n");
    expect(await readFile(path, "utf8")).toBe(`${n.knownHostsLine}\n`);
    expect((await pool(path).get(sshNodeConfig(sshd, 0)).run(["echo", "ok"])).stdout).toBe("ok\n");
  });

  it("accepts hashed known_hosts entries and skips non-matching ones", async () => {
    const n = sshd.nodes[0]!;
    const [type, key] = n.hostKey.split(" ");
    const other = sshd.nodes[1]!.hostKey;
    const text = [
      `# comment`,
      `${hashHostName("[127.0.0.99]:22", randomBytes(20))} ${other}`,
      `${hashHostName(knownHostsName(n.host, n.port), randomBytes(20))} ${type} ${key}`,
      "",
    ].join("\n");
    const path = await knownHosts("hashed", text);
    expect((await pool(path).get(sshNodeConfig(sshd, 0)).run(["echo", "ok"])).stdout).toBe("ok\n");
  });

  it("a hashed entry with a different key is a changed key", async () => {
    const n = sshd.nodes[0]!;
    const [type] = n.hostKey.split(" ");
    const foreignKey = sshd.nodes[1]!.hostKey.split(" ")[1];
    const path = await knownHosts("hashed-changed", `${hashHostName(knownHostsName(n.host, n.port), randomBytes(20))} ${type} ${foreignKey}\n`);
    await expect(pool(path).get(sshNodeConfig(sshd, 0)).run(["true"])).rejects.toMatchObject({ reason: "HostKeyChanged" });
  });
});

describe("ssh config aliases", () => {
  it("resolves HostName, Port, User and IdentityFile of a Host alias", async () => {
    const n = sshd.nodes[0]!;
    const sshConfig = join(dir, "ssh_config");
    await writeFile(
      sshConfig,
      [
        "Host other",
        "  HostName 127.0.0.250",
        `Host gpu-box gpu-*`,
        `  HostName ${n.host}`,
        `  Port ${n.port}`,
        `  User ${n.user}`,
        `  IdentityFile ${sshd.identityFile}`,
        "Host *",
        "  User nobody-else",
        "",
      ].join("\n"),
    );
    const node = pool(sshd.knownHostsPath, sshConfig).get({ name: "gpu", host: "gpu-box", hostKeyPolicy: "strict", modelDir: n.modelDir });
    expect((await node.run(["sh", "-c", 'echo "$SSH_CONNECTION"'])).stdout.trim().split(" ").slice(2)).toEqual([n.host, String(n.port)]);
  });

  it("a port the settings give wins over the alias's Port, 22 included; unset, the alias's Port", async () => {
    const n = sshd.nodes[0]!;
    const sshConfig = join(dir, "ssh_config_port");
    await writeFile(sshConfig, [`Host gpu-box`, `  HostName ${n.host}`, `  Port 2`, `  User ${n.user}`, `  IdentityFile ${sshd.identityFile}`, ""].join("\n"));
    const node = pool(sshd.knownHostsPath, sshConfig).get({ name: "gpu", host: "gpu-box", port: n.port, hostKeyPolicy: "strict", modelDir: n.modelDir });
    expect((await node.run(["sh", "-c", 'echo "$SSH_CONNECTION"'])).stdout.trim().split(" ").slice(2)).toEqual([n.host, String(n.port)]);
    // No sshd listens on 22 here: what the target resolves to is the finding.
    const base = { name: "gpu", host: "gpu-box", hostKeyPolicy: "strict" as const, modelDir: n.modelDir };
    expect((await resolveTarget({ ...base, port: 22 }, { sshConfigPath: sshConfig })).port).toBe(22);
    expect((await resolveTarget(base, { sshConfigPath: sshConfig })).port).toBe(2);
  });
});

describe("a plan that probes its nodes", () => {
  it("keeps the SSH failure's own reason (HostKeyUnknown), not NodeUnreachable: scripts match on it; retried all the same", async () => {
    const path = await knownHosts("empty-for-plan", "");
    const settings = parseSettings('[nodes.n1]\nhost = "127.0.0.1"\nmodel_dir = "/m"\nmemory = "1GiB"\n', join(dir, "shardctl.toml"));
    if (!settings.ok) throw new Error(JSON.stringify(settings.issues));
    const cluster = parseCluster('nodes = ["n1"]\n[model]\nid = "org/m"\n', join(dir, "c.toml"), settings.value);
    if (!cluster.ok) throw new Error(JSON.stringify(cluster.issues));
    const node = pool(path).get(sshNodeConfig(sshd, 0));
    const error = await probeClusterNodes(cluster.value, { stages: [node], coordinator: node }).catch((e: unknown) => e);
    expect(error).toMatchObject({ reason: "HostKeyUnknown", terminal: false });
    expect((error as Error).message).toMatch(/^cannot probe node-1 \(node node-1: host key of .* is not in /);
  });

  // Regression: the daemon said NodeUnreachable and retried for ever where `shardctl nodes` said
  // SshConfigUnsupported, terminal (CI's wait ran to its timeout).
  it("a node the ssh config reaches through a proxy: SshConfigUnsupported, terminal, as `shardctl nodes` says", async () => {
    const settings = parseSettings('[nodes.n1]\nhost = "gpu-proxied"\nmodel_dir = "/m"\nmemory = "1GiB"\n', join(dir, "shardctl.toml"));
    if (!settings.ok) throw new Error(JSON.stringify(settings.issues));
    const cluster = parseCluster('nodes = ["n1"]\n[model]\nid = "org/m"\n', join(dir, "c.toml"), settings.value);
    if (!cluster.ok) throw new Error(JSON.stringify(cluster.issues));
    const sshConfig = join(dir, "proxied.conf");
    await writeFile(sshConfig, "Host gpu-proxied\n  HostName 127.0.0.9\n  ProxyJump me@bastion.example\n");
    const node = pool(sshd.knownHostsPath, sshConfig).get({ name: "n1", host: "gpu-proxied", port: 22, hostKeyPolicy: "strict", modelDir: "/m" });
    const error = await probeClusterNodes(cluster.value, { stages: [node], coordinator: node }).catch((e: unknown) => e);
    expect(error).toMatchObject({ reason: "SshConfigUnsupported", terminal: true });
  });
});
