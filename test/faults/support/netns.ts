/**
 * A lab of network namespaces for fault tests and bench/faults.ts: one namespace per stage host,
 * each with its own veth address on a bridge in the root namespace (where the daemon and the
 * coordinator run) and its own real sshd on port 22 of that address. Faults are made the way they
 * happen: iptables DROP in a host's namespace (a partition: no FIN, no RST), killing its sshd
 * processes or dropping its port 22 alone (the control channel lost, the data path fine), iptables
 * `statistic` for random loss.
 * (`tc qdisc … netem` needs the sch_netem module, which this kernel does not have and cannot load;
 * `tbf` works for a rate limit.)
 *
 * Names carry this process's pid (`sfl<pid36>-…`), so a lab left behind by a killed run is found and
 * removed at the next start (its pid no longer runs), and two runs never share a name. Addresses
 * are 10.<200-249>.<x>.0/24, picked so no route of this machine already covers them. Needs root;
 * installs Debian's iptables when missing, or fails naming the package. No vitest imports.
 */
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { mkdir, mkdtemp, readFile, readlink, rm, writeFile } from "node:fs/promises";
import { connect } from "node:net";
import { tmpdir, userInfo } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { ensureSshd, type SshdNode, type SshdSet } from "../../support/sshd.js";
import { creatorOf, ensureTool, isRunning, killNamespace, namespacePids, removeStaleNamespaces } from "../../support/namespaces.js";

const run = promisify(execFile);
const sshdPath = "/usr/sbin/sshd";
const prefix = "sfl";

export interface LabHost {
  name: string;
  /** Network namespace name. */
  netns: string;
  /** The host's address on the lab bridge. */
  address: string;
  /** Cut the host off: every packet in and out dropped, silently. */
  partition(): Promise<void>;
  heal(): Promise<void>;
  /** Drop this fraction (0..1) of packets in each direction at random. */
  loss(fraction: number): Promise<void>;
  /**
   * Drop every packet to and from the host's sshd (TCP port 22, both ways, silently): the control
   * channel goes silent, every other link of the host (the pipeline's) keeps working. `heal` ends it.
   */
  cutSsh(): Promise<void>;
  /**
   * Drop every TCP packet to and from the host but its sshd's (silently, both ways): the pipeline's
   * links go silent, the control channel keeps working. `heal` ends it.
   */
  cutData(): Promise<void>;
  /**
   * Drop every packet between the host and the root namespace's bridge address (both ways,
   * silently), where the daemon runs: the daemon's own network lost, while the lab hosts still reach
   * each other. `heal` ends it.
   */
  cutFromGateway(): Promise<void>;
  /** Kill every sshd process of the host (listener and sessions): the control channel is lost. */
  killSshd(): Promise<void>;
  startSshd(): Promise<void>;
  /** Pids of every process in the host's namespace. */
  pids(): Promise<number[]>;
}

export interface Lab {
  hosts: LabHost[];
  /** The root namespace's address on the bridge. */
  gateway: string;
  /** The hosts as SSH nodes n1.. for test/reconciler/daemon-fixture.ts's settings. */
  sshd: SshdSet;
  close(): Promise<void>;
}

async function sh(args: string[]): Promise<string> {
  const { stdout } = await run(args[0]!, args.slice(1), { maxBuffer: 16 << 20 });
  return stdout;
}

/** iptables in the root namespace is not needed; inside a namespace it must exist. */
async function ensureTools(): Promise<void> {
  if (process.getuid?.() !== 0) throw new Error("the fault lab needs root (network namespaces, veth, iptables)");
  await ensureSshd();
  for (const [tool, pkg] of [
    ["/usr/sbin/ip", "iproute2"],
    ["/usr/sbin/iptables", "iptables"],
  ] as const)
    await ensureTool(tool, pkg);
}

/** Remove namespaces and links of labs whose creating process is gone. */
export async function removeStaleLabs(): Promise<void> {
  await removeStaleNamespaces(prefix);
  const links = (await sh(["ip", "-o", "link", "show"]))
    .split("\n")
    .map((l) => /^\d+:\s+([^:@\s]+)/.exec(l)?.[1])
    .filter((n): n is string => n?.startsWith(prefix) === true);
  for (const link of links) {
    const creator = creatorOf(link, prefix);
    if (creator !== undefined && !isRunning(creator)) await run("ip", ["link", "del", link]).catch(() => undefined);
  }
}

async function pickSubnet(): Promise<string> {
  const routes = await sh(["ip", "-4", "route", "show"]);
  for (let tries = 0; tries < 50; tries++) {
    const subnet = `10.${200 + Math.floor(Math.random() * 50)}.${Math.floor(Math.random() * 250)}`;
    if (!routes.includes(`${subnet}.`)) return subnet;
  }
  throw new Error("no free 10.x.y.0/24 subnet for the fault lab");
}

export async function startLab(count = 3): Promise<Lab> {
  await ensureTools();
  await removeStaleLabs();
  const id = `${prefix}${process.pid.toString(36)}-${Math.floor(Math.random() * 36 ** 2).toString(36)}`;
  const subnet = await pickSubnet();
  const bridge = `${id}b`;
  const gateway = `${subnet}.1`;
  const root = await mkdtemp(join(tmpdir(), "shardctl-faults-"));
  const created: string[] = [];
  const sshds = new Map<string, ChildProcess>();
  const cleanup = async (): Promise<void> => {
    for (const child of sshds.values()) child.kill("SIGKILL");
    for (const ns of created) await killNamespace(ns);
    await run("ip", ["link", "del", bridge]).catch(() => undefined);
    await rm(root, { recursive: true, force: true });
  };
  try {
    await sh(["ip", "link", "add", bridge, "type", "bridge"]);
    await sh(["ip", "addr", "add", `${gateway}/24`, "dev", bridge]);
    await sh(["ip", "link", "set", bridge, "up"]);

    const identityFile = join(root, "client_ed25519");
    await run("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-C", "shardctl-faults", "-f", identityFile]);
    const authorizedKeys = join(root, "authorized_keys");
    await writeFile(authorizedKeys, await readFile(`${identityFile}.pub`, "utf8"), { mode: 0o600 });
    await mkdir("/run/sshd", { recursive: true, mode: 0o755 });
    const user = userInfo().username;

    const hosts: LabHost[] = [];
    const nodes: SshdNode[] = [];
    for (let i = 0; i < count; i++) {
      const name = `n${i + 1}`;
      const ns = `${id}h${i + 1}`;
      const veth = `${id}v${i + 1}`;
      const address = `${subnet}.${10 + i}`;
      await sh(["ip", "netns", "add", ns]);
      created.push(ns);
      await sh(["ip", "link", "add", veth, "type", "veth", "peer", "name", `${veth}p`]);
      await sh(["ip", "link", "set", `${veth}p`, "netns", ns]);
      await sh(["ip", "link", "set", veth, "master", bridge]);
      await sh(["ip", "link", "set", veth, "up"]);
      const inNs = (args: string[]): Promise<string> => sh(["ip", "netns", "exec", ns, ...args]);
      await inNs(["ip", "link", "set", "lo", "up"]);
      await inNs(["ip", "link", "set", `${veth}p`, "name", "eth0"]);
      await inNs(["ip", "addr", "add", `${address}/24`, "dev", "eth0"]);
      await inNs(["ip", "link", "set", "eth0", "up"]);

      const dir = join(root, name);
      const modelDir = join(dir, "models");
      await mkdir(modelDir, { recursive: true });
      const hostKeyPath = join(dir, "host_ed25519");
      await run("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-C", name, "-f", hostKeyPath]);
      const hostKey = (await readFile(`${hostKeyPath}.pub`, "utf8")).trim().split(/\s+/).slice(0, 2).join(" ");
      const config = join(dir, "sshd_config");
      await writeFile(
        config,
        [
          `ListenAddress ${address}:22`,
          `HostKey ${hostKeyPath}`,
          `AuthorizedKeysFile ${authorizedKeys}`,
          "PubkeyAuthentication yes",
          "PasswordAuthentication no",
          "KbdInteractiveAuthentication no",
          "PermitRootLogin prohibit-password",
          "UsePAM no",
          "StrictModes no",
          "PidFile none",
          "MaxSessions 200",
          "MaxStartups 200:30:400",
          "Subsystem sftp internal-sftp",
          "LogLevel ERROR",
          "SetEnv SHLVL=1",
          "",
        ].join("\n"),
      );
      const startSshd = async (): Promise<void> => {
        const child = spawn("ip", ["netns", "exec", ns, sshdPath, "-D", "-e", "-f", config], { stdio: ["ignore", "ignore", "pipe"] });
        let stderr = "";
        child.stderr?.on("data", (d: Buffer) => (stderr += d.toString()));
        sshds.set(name, child);
        if (!(await waitListening(address, 22, 10_000))) throw new Error(`sshd of ${name} (${ns}) did not listen on ${address}:22: ${stderr}`);
      };
      const killSshd = async (): Promise<void> => {
        sshds.get(name)?.kill("SIGKILL");
        sshds.delete(name);
        for (const pid of await namespacePids(ns)) {
          const exe = await readlink(`/proc/${pid}/exe`).catch(() => "");
          if (exe === sshdPath) process.kill(pid, "SIGKILL");
        }
      };
      const iptables = (args: string[]): Promise<string> => inNs(["iptables", "-w", ...args]);
      await startSshd();
      hosts.push({
        name,
        netns: ns,
        address,
        partition: async () => {
          await iptables(["-I", "INPUT", "-j", "DROP"]);
          await iptables(["-I", "OUTPUT", "-j", "DROP"]);
        },
        heal: async () => {
          await iptables(["-F", "INPUT"]);
          await iptables(["-F", "OUTPUT"]);
        },
        cutSsh: async () => {
          await iptables(["-I", "INPUT", "-p", "tcp", "--dport", "22", "-j", "DROP"]);
          await iptables(["-I", "OUTPUT", "-p", "tcp", "--sport", "22", "-j", "DROP"]);
        },
        cutData: async () => {
          await iptables(["-I", "INPUT", "-p", "tcp", "!", "--dport", "22", "-j", "DROP"]);
          await iptables(["-I", "OUTPUT", "-p", "tcp", "!", "--sport", "22", "-j", "DROP"]);
        },
        cutFromGateway: async () => {
          await iptables(["-I", "INPUT", "-s", gateway, "-j", "DROP"]);
          await iptables(["-I", "OUTPUT", "-d", gateway, "-j", "DROP"]);
        },
        loss: async (fraction) => {
          const p = String(fraction);
          await iptables(["-A", "INPUT", "-m", "statistic", "--mode", "random", "--probability", p, "-j", "DROP"]);
          await iptables(["-A", "OUTPUT", "-m", "statistic", "--mode", "random", "--probability", p, "-j", "DROP"]);
        },
        killSshd,
        startSshd,
        pids: () => namespacePids(ns),
      });
      nodes.push({
        name,
        host: address,
        port: 22,
        user,
        modelDir,
        hostKey,
        ecdsaHostKey: "",
        knownHostsLine: `${address} ${hostKey}`,
        rotateHostKey: () => Promise.reject(new Error("not supported in the fault lab")),
        stop: killSshd,
        start: startSshd,
      });
    }
    const knownHostsPath = join(root, "known_hosts");
    await writeFile(knownHostsPath, nodes.map((n) => n.knownHostsLine).join("\n") + "\n");
    let closed = false;
    const close = async (): Promise<void> => {
      if (closed) return;
      closed = true;
      await cleanup();
    };
    return { hosts, gateway, sshd: { nodes, identityFile, knownHostsPath, root, close }, close };
  } catch (error) {
    await cleanup();
    throw error;
  }
}

async function waitListening(host: string, port: number, deadlineMs: number): Promise<boolean> {
  const until = Date.now() + deadlineMs;
  while (Date.now() < until) {
    const ok = await new Promise<boolean>((resolve) => {
      const s = connect({ host, port });
      s.once("connect", () => (s.destroy(), resolve(true)));
      s.once("error", () => resolve(false));
    });
    if (ok) return true;
    await new Promise((r) => setTimeout(r, 50));
  }
  return false;
}
