/**
 * Real OpenSSH servers for tests and benchmarks: one `sshd` per test node on its own loopback address
 * (leased with allocateHost from ./test-world.ts, so no other test file or process binds it), each
 * with its own port, host key and model directory, and one client key
 * authorised on all of them. Keys are generated per run with ssh-keygen in a temp dir. When
 * /usr/sbin/sshd is missing and we are root, Debian's openssh-server is installed with apt-get;
 * otherwise setup fails naming the package. It never skips. No vitest imports (bench uses it too).
 */
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { connect } from "node:net";
import { tmpdir, userInfo } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import type { NodeConfig } from "../../src/nodes/index.js";
import { freePort } from "./free-ports.js";
import { allocateHosts } from "./test-world.js";
import { aptInstall } from "./apt.js";

const run = promisify(execFile);
const sshdPath = "/usr/sbin/sshd";

export interface SshdNode {
  /** Node name used in configs: "node-1", "node-2", … */
  name: string;
  /** Loopback address the server listens on. */
  host: string;
  port: number;
  /** Login user (the user running the tests). */
  user: string;
  /** A model directory private to this node. */
  modelDir: string;
  /** The server's public host key line ("ssh-ed25519 AAAA…"). */
  hostKey: string;
  /** Its second host key, ECDSA ("ecdsa-sha2-nistp256 AAAA…"): servers usually have several. */
  ecdsaHostKey: string;
  /** The known_hosts line for this server, plain `[host]:port` form. */
  knownHostsLine: string;
  /** Restart the server with a fresh host key (to test a changed key). */
  rotateHostKey(): Promise<void>;
  /**
   * Stop this server (the others keep running). Connections already made live on in their own sshd
   * processes, as they do on a real machine whose sshd is stopped; `{ connections: true }` ends them
   * too, as a machine that goes down does.
   */
  stop(options?: { connections?: boolean }): Promise<void>;
  /** Start it again after `stop` (same port and key); `sshdOptions` are more of sshd's `-o` settings (e.g. `ForceCommand=…`). */
  start(sshdOptions?: readonly string[]): Promise<void>;
  /** The listening sshd's pid (sessions it forks from now on inherit its limits and cgroup); undefined while stopped, or where the fixture does not know it. */
  readonly pid?: number;
}

export interface SshdSet {
  nodes: SshdNode[];
  /** Private key accepted by every node. */
  identityFile: string;
  /** A known_hosts file listing every node's key (plain entries). */
  knownHostsPath: string;
  /** Temp root holding everything; removed by close(). */
  root: string;
  close(): Promise<void>;
}

export interface SshdOptions {
  /** Number of servers. Default 2. */
  count?: number;
  /** Listen addresses, one per server. Default: `count` hosts leased with allocateHosts (test-world.ts). */
  hosts?: readonly string[];
  /**
   * @deprecated Ignored: hand-picked addresses collided between test files run in parallel. Hosts
   * are leased with allocateHosts (test-world.ts); accepted so older callers still compile.
   */
  firstHost?: number;
  /** sshd MaxSessions (sessions per connection). Default 200; OpenSSH's own default is 10. */
  maxSessions?: number;
  /** More environment for every session, `NAME=value` (e.g. `BASH_ENV=…`, a shell start-up file). */
  setEnv?: readonly string[];
  /**
   * The SFTP server: "internal" (sshd's own, the default) or "shell", Debian's default
   * (/usr/lib/openssh/sftp-server started by the user's shell, whose start-up files then run).
   */
  sftp?: "internal" | "shell";
}

/** Install openssh-server when missing (root only); throw naming the package otherwise. */
export async function ensureSshd(): Promise<void> {
  if (existsSync(sshdPath)) return;
  if (process.getuid?.() !== 0) {
    throw new Error(`${sshdPath} is missing: install Debian's "openssh-server" package (apt-get install -y openssh-server)`);
  }
  await aptInstall(["openssh-server"]);
  if (!existsSync(sshdPath)) throw new Error(`installing "openssh-server" did not provide ${sshdPath}`);
}

export async function startSshdNodes(options: SshdOptions = {}): Promise<SshdSet> {
  await ensureSshd();
  // sshd insists on its privilege separation directory.
  await mkdir("/run/sshd", { recursive: true, mode: 0o755 });
  const count = options.hosts?.length ?? options.count ?? 2;
  if (options.hosts !== undefined && options.count !== undefined && options.count !== options.hosts.length) {
    throw new Error(`startSshdNodes: count ${options.count} but ${options.hosts.length} hosts`);
  }
  const hosts = options.hosts ?? (await allocateHosts(count));
  const root = await mkdtemp(join(tmpdir(), "shardctl-sshd-"));
  const identityFile = join(root, "client_ed25519");
  await run("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-C", "shardctl-test", "-f", identityFile]);
  const clientPub = await readFile(`${identityFile}.pub`, "utf8");
  const authorizedKeys = join(root, "authorized_keys");
  await writeFile(authorizedKeys, clientPub, { mode: 0o600 });
  const user = userInfo().username;

  const nodes: SshdNode[] = [];
  try {
    for (let i = 0; i < count; i++) {
      nodes.push(await startOne(root, `node-${i + 1}`, hosts[i]!, user, authorizedKeys, options.maxSessions ?? 200, options.setEnv ?? [], options.sftp ?? "internal"));
    }
  } catch (error) {
    await Promise.all(nodes.map((n) => n.stop()));
    await rm(root, { recursive: true, force: true });
    throw error;
  }
  const knownHostsPath = join(root, "known_hosts");
  await writeFile(knownHostsPath, nodes.map((n) => n.knownHostsLine).join("\n") + "\n");
  return {
    nodes,
    identityFile,
    knownHostsPath,
    root,
    close: async () => {
      await Promise.all(nodes.map((n) => n.stop()));
      await rm(root, { recursive: true, force: true });
    },
  };
}

/**
 * The node config that reaches sshd node `index` of `set` (its address, port and user, the set's
 * client key, strict host keys, its model directory), with `overrides` applied: one place for how
 * a test reaches an sshd node.
 */
export function sshNodeConfig(set: SshdSet, index: number, overrides: Partial<NodeConfig> = {}): NodeConfig {
  const n = set.nodes[index];
  if (n === undefined) throw new Error(`sshNodeConfig: no sshd node ${index} (${set.nodes.length} started)`);
  return { name: n.name, host: n.host, port: n.port, user: n.user, identityFile: set.identityFile, hostKeyPolicy: "strict", modelDir: n.modelDir, ...overrides };
}

/** Settings (shardctl.toml text) registering sshd node `index` of `set` as node `name`, with the set's known_hosts and no ssh config. */
export function sshNodeSettings(set: SshdSet, index: number, name = "n1"): string {
  const n = set.nodes[index];
  if (n === undefined) throw new Error(`sshNodeSettings: no sshd node ${index} (${set.nodes.length} started)`);
  return `[ssh]\nknown_hosts = "${set.knownHostsPath}"\nconfig = "${join(set.root, "no-config")}"\n\n[nodes.${name}]\nhost = "${n.host}"\nport = ${n.port}\nuser = "${n.user}"\nidentity_file = "${set.identityFile}"\nmodel_dir = "${n.modelDir}"\n`;
}

async function startOne(
  root: string,
  name: string,
  host: string,
  user: string,
  authorizedKeys: string,
  maxSessions: number,
  setEnv: readonly string[],
  sftp: "internal" | "shell",
): Promise<SshdNode> {
  const dir = join(root, name);
  const modelDir = join(dir, "models");
  await mkdir(modelDir, { recursive: true });
  const hostKeyPath = join(dir, "host_ed25519");
  const ecdsaKeyPath = join(dir, "host_ecdsa");
  let child: ChildProcess | undefined;
  let port = 0;
  let hostKey = "";

  async function makeHostKey(): Promise<void> {
    await rm(hostKeyPath, { force: true });
    await rm(`${hostKeyPath}.pub`, { force: true });
    await run("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-C", name, "-f", hostKeyPath]);
    hostKey = (await readFile(`${hostKeyPath}.pub`, "utf8")).trim().split(/\s+/).slice(0, 2).join(" ");
  }

  async function launch(): Promise<void> {
    // A free port can be taken between probe and bind by a concurrent test: retry a few times.
    for (let attempt = 0; ; attempt++) {
      if (port === 0 || attempt > 0) port = await pickPort(host);
      const config = join(dir, "sshd_config");
      await writeFile(
        config,
        [
          `ListenAddress ${host}:${port}`,
          `HostKey ${hostKeyPath}`,
          `HostKey ${ecdsaKeyPath}`,
          `AuthorizedKeysFile ${authorizedKeys}`,
          "PubkeyAuthentication yes",
          "PasswordAuthentication no",
          "KbdInteractiveAuthentication no",
          "PermitRootLogin prohibit-password",
          "UsePAM no",
          "StrictModes no",
          "PidFile none",
          // Pooled connections multiplex many channels; benches open many short connections.
          `MaxSessions ${maxSessions}`,
          "MaxStartups 200:30:400",
          `Subsystem sftp ${sftp === "internal" ? "internal-sftp" : "/usr/lib/openssh/sftp-server"}`,
          "LogLevel ERROR",
          // bash sources ~/.bashrc for sshd commands unless SHLVL says it is nested; the host's
          // bashrc (pyenv init…) would add ~100 ms to every command and drown what tests measure.
          // One SetEnv line: sshd takes a keyword's first value.
          ["SetEnv SHLVL=1", ...setEnv].join(" "),
          "",
        ].join("\n"),
      );
      const proc = spawn(sshdPath, ["-D", "-e", "-f", config], { stdio: ["ignore", "ignore", "pipe"] });
      let stderr = "";
      proc.stderr?.on("data", (d: Buffer) => (stderr += d.toString()));
      const exited = new Promise<void>((resolve) => proc.once("exit", () => resolve()));
      const ready = await Promise.race([waitListening(host, port, 10_000), exited.then(() => false)]);
      if (ready) {
        child = proc;
        return;
      }
      proc.kill("SIGKILL");
      if (attempt >= 4) throw new Error(`sshd for ${name} on ${host}:${port} did not start: ${stderr.trim()}`);
    }
  }

  async function stop(options: { connections?: boolean } = {}): Promise<void> {
    const c = child;
    child = undefined;
    if (c === undefined || c.exitCode !== null || c.signalCode !== null) return;
    // Each connection is a child sshd of the listener.
    if (options.connections === true) await run("pkill", ["-TERM", "-P", String(c.pid)]).catch(() => undefined);
    const gone = new Promise<void>((resolve) => c.once("exit", () => resolve()));
    c.kill("SIGTERM");
    await gone;
  }

  await makeHostKey();
  await run("ssh-keygen", ["-q", "-t", "ecdsa", "-b", "256", "-N", "", "-C", name, "-f", ecdsaKeyPath]);
  const ecdsaHostKey = (await readFile(`${ecdsaKeyPath}.pub`, "utf8")).trim().split(/\s+/).slice(0, 2).join(" ");
  await launch();
  const node: SshdNode = {
    name,
    host,
    get port() {
      return port;
    },
    user,
    modelDir,
    get hostKey() {
      return hostKey;
    },
    ecdsaHostKey,
    get knownHostsLine() {
      return `[${host}]:${port} ${hostKey}`;
    },
    rotateHostKey: async () => {
      await stop();
      await makeHostKey();
      await launchSamePort();
    },
    stop,
    start: (sshdOptions = []) => launchSamePort(sshdOptions),
    get pid() {
      return child?.pid;
    },
  };
  async function launchSamePort(sshdOptions: readonly string[] = []): Promise<void> {
    const keep = port;
    try {
      // Same port so known_hosts entries still name this server.
      const proc = spawn(sshdPath, ["-D", "-e", "-f", join(dir, "sshd_config"), ...sshdOptions.flatMap((o) => ["-o", o])], { stdio: ["ignore", "ignore", "pipe"] });
      const exited = new Promise<void>((resolve) => proc.once("exit", () => resolve()));
      const ready = await Promise.race([waitListening(host, keep, 10_000), exited.then(() => false)]);
      if (!ready) throw new Error(`sshd for ${name} could not restart on ${host}:${keep}`);
      child = proc;
    } finally {
      port = keep;
    }
  }
  return node;
}

const pickPort = freePort;

async function waitListening(host: string, port: number, deadlineMs: number): Promise<boolean> {
  const until = Date.now() + deadlineMs;
  while (Date.now() < until) {
    const ok = await new Promise<boolean>((resolve) => {
      const s = connect({ host, port });
      s.once("connect", () => {
        s.destroy();
        resolve(true);
      });
      s.once("error", () => resolve(false));
    });
    if (ok) return true;
    await new Promise((r) => setTimeout(r, 50));
  }
  return false;
}
