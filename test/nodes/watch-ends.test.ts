/**
 * An exit watch has no deadline: it lives as long as the process it watches. It must still end
 * when nobody wants it any more, or when its connection is gone, or whoever stops it (the daemon's
 * stop, a monitor) waits for ever on a node that does not answer:
 *   - aborted while its connection is still being made (a peer that accepts TCP and says nothing),
 *     the watch ends at once, and closing the pool ends that connection;
 *   - when the connection drops before the server answered the channel open (the node's sshd
 *     stopped: SIGSTOP), the watch fails within the keepalive bound instead of waiting for ever
 *     (ssh2 fails a channel open still unanswered when its connection closes; the keepalive
 *     closes a connection whose peer stopped answering);
 *   - aborted while it waits, the wait (GNU tail's, which forks nothing while it waits) ends too.
 */
import { execFileSync, spawn } from "node:child_process";
import { readFileSync, readdirSync } from "node:fs";
import { createServer, type Socket } from "node:net";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { LocalNode, NodePool, SshNode } from "../../src/nodes/index.js";
import { sshNodeConfig, startSshdNodes, type SshdSet } from "../support/sshd.js";
import { allocateHost } from "../support/test-world.js";

let sshd: SshdSet;
const stopped: number[] = [];

beforeAll(async () => {
  sshd = await startSshdNodes({ count: 1 });
});

afterAll(async () => {
  for (const pid of stopped) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      // gone already
    }
  }
  await sshd?.close();
});

it("aborted while its connection is being made: the watch ends at once, and the pool's close ends the connection", async () => {
  const host = await allocateHost();
  const sockets: Socket[] = [];
  let closes = 0;
  const silent = createServer((socket) => {
    sockets.push(socket);
    // Read and drop what the client says (its SSH banner), answer nothing; reading lets the end be seen.
    socket.resume();
    socket.once("close", () => closes++);
  });
  await new Promise<void>((resolve) => silent.listen(0, host, resolve));
  const port = (silent.address() as { port: number }).port;
  const pool = new NodePool({ knownHostsPath: sshd.knownHostsPath, sshConfigPath: join(sshd.root, "none") });
  try {
    const node = pool.get({ name: "silent", host, port, user: "root", identityFile: sshd.identityFile, hostKeyPolicy: "strict", modelDir: "/tmp" });
    const controller = new AbortController();
    const watch = node.watchExit(4_000_000, "0", { signal: controller.signal });
    while (sockets.length === 0) await new Promise((r) => setTimeout(r, 20));
    controller.abort();
    const abortedAt = performance.now();
    await watch;
    // The handshake alone would have waited for its 4 s deadline.
    expect(performance.now() - abortedAt).toBeLessThan(1_000);
    // The watch was the connection's only user: ending it closes the connection, handshake and all
    // (before, it lived on until its handshake deadline, and a daemon that stopped stayed alive).
    await pool.close();
    const deadline = performance.now() + 1_000;
    while (closes < sockets.length && performance.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    expect(closes).toBe(sockets.length);
  } finally {
    await pool.close();
    for (const s of sockets) s.destroy();
    await new Promise<void>((resolve) => silent.close(() => resolve()));
  }
});

it("its connection drops before the channel opens (sshd stopped): the watch fails within the keepalive bound", async () => {
  const n = sshd.nodes[0]!;
  const pool = new NodePool({ knownHostsPath: sshd.knownHostsPath, sshConfigPath: join(sshd.root, "none") });
  try {
    const node = pool.get(sshNodeConfig(sshd, 0));
    // A first watch opens the watch connection and keeps it: its script runs under that
    // connection's sshd session.
    const sleeper = await node.startDetached(["sleep", "60"], { logFile: join(n.modelDir, "sleep.log") });
    const first = node.watchExit(sleeper.pid, sleeper.startTime).catch(() => undefined);
    const listener = listenerPid(n.host, n.port);
    const until = Date.now() + 10_000;
    while (!descendantsOf(listener).some((pid) => commandOf(pid).includes(String(sleeper.pid))) && Date.now() < until) await new Promise((r) => setTimeout(r, 50));
    // Stop every sshd process serving a connection (not the listener): nothing is answered any more.
    for (const pid of descendantsOf(listener)) {
      try {
        process.kill(pid, "SIGSTOP");
        stopped.push(pid);
      } catch (error) {
        // A session that ended between the listing and now (the start command's): nothing to stop.
        if ((error as NodeJS.ErrnoException).code !== "ESRCH") throw error;
      }
    }
    const startedAt = performance.now();
    const outcome = await node.watchExit(sleeper.pid, sleeper.startTime).then(
      () => "ended without an error",
      (error: unknown) => (error as { reason?: string }).reason ?? String(error),
    );
    expect(outcome).toBe("NodeUnreachable");
    // Keepalive: 1 s × 3 unanswered, then the connection is given up.
    expect(performance.now() - startedAt).toBeLessThan(10_000);
    await first;
  } finally {
    await pool.close();
  }
}, 30_000);

it("a watch waits without forking ten times a second, and once aborted leaves nothing behind on its node (local and SSH)", async () => {
  const n = sshd.nodes[0]!;
  const pool = new NodePool({ knownHostsPath: sshd.knownHostsPath, sshConfigPath: join(sshd.root, "none") });
  try {
    for (const node of [pool.get({ name: "here", host: "local", modelDir: n.modelDir }), pool.get(sshNodeConfig(sshd, 0))]) {
      const sleeper = await node.startDetached(["sleep", "60"], { logFile: join(n.modelDir, `sleep-${node.config.name}.log`) });
      const controller = new AbortController();
      const watch = node.watchExit(sleeper.pid, sleeper.startTime, { signal: controller.signal }).catch(() => undefined);
      const waiting = (): number[] => allPids().filter((pid) => commandOf(pid).includes(`--pid=${sleeper.pid} `));
      const until = Date.now() + 10_000;
      while (waiting().length === 0 && Date.now() < until) await new Promise((r) => setTimeout(r, 50));
      // The wait itself is GNU tail's: a pid checked with kill(2), no \`sleep 0.1\` forked ten times a second.
      expect(waiting()).toHaveLength(1);
      // Sampled below what runs the watch: this process for the local node, the node's sshd for SSH
      // (other programs on this machine may run such loops of their own).
      const root = node.config.name === "here" ? process.pid : listenerPid(n.host, n.port);
      const sleeps = new Set<number>();
      const sampleUntil = Date.now() + 2_000;
      while (Date.now() < sampleUntil) {
        for (const pid of descendantsOf(root)) if (commandOf(pid) === "sleep 0.1 ") sleeps.add(pid);
        await new Promise((r) => setTimeout(r, 10));
      }
      expect(sleeps.size).toBe(0);
      controller.abort();
      await watch;
      // The keep-alive finds its channel gone within a second and ends the wait with it.
      const goneBy = Date.now() + 5_000;
      while (waiting().length > 0 && Date.now() < goneBy) await new Promise((r) => setTimeout(r, 50));
      expect({ node: node.config.name, left: waiting() }).toEqual({ node: node.config.name, left: [] });
      process.kill(sleeper.pid, "SIGKILL");
    }
  } finally {
    await pool.close();
  }
}, 60_000);

it("a watch keeps none of what its command writes past the pid (a keep-alive byte a second for as long as a stage runs), locally and over SSH", async () => {
  // The watch path itself, given a command that writes as a watch's keep-alive does.
  class LocalWatch extends LocalNode {
    watch(argv: string[]): ReturnType<LocalNode["runWatch"]> {
      return this.runWatch(argv, undefined);
    }
  }
  class SshWatch extends SshNode {
    watch(argv: string[]): ReturnType<SshNode["runWatch"]> {
      return this.runWatch(argv, undefined);
    }
  }
  // A pause first, so the shell's pid comes alone rather than with the first byte.
  const writer = ["sh", "-c", "sleep 0.3; for i in 1 2 3 4 5; do printf .; sleep 0.1; done"];
  const local = new LocalWatch({ name: "here", host: "local", modelDir: sshd.nodes[0]!.modelDir });
  const remote = new SshWatch(sshNodeConfig(sshd, 0), { knownHostsPath: sshd.knownHostsPath, sshConfigPath: join(sshd.root, "none") });
  try {
    for (const node of [local, remote]) {
      const result = await node.watch(writer);
      // (A loaded machine may still deliver the first byte with the pid's line, in one read.)
      expect({ exitCode: result.exitCode, kept: result.stdout.length <= 1 }).toEqual({ exitCode: 0, kept: true });
    }
    // Anything else keeps its output.
    expect((await remote.run(writer)).stdout).toBe(".....");
  } finally {
    await Promise.all([local.close(), remote.close()]);
  }
});

it("a watched process that stays a zombie (its parent never reaps it) ends the watch within seconds", async () => {
  // `sleep 1` is the child of a shell that then becomes `sleep 30`, which never reaps it.
  const parent = spawn("sh", ["-c", "sleep 1 & echo $!; exec sleep 30"], { stdio: ["ignore", "pipe", "ignore"] });
  try {
    const pid = Number((await new Promise<Buffer>((resolve) => parent.stdout.once("data", resolve))).toString().trim());
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const startTime = `linux:${stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19]}`;
    const node = new LocalNode({ name: "here", host: "local", modelDir: sshd.nodes[0]!.modelDir });
    const startedAt = Date.now();
    await node.watchExit(pid, startTime);
    // It exits after 1 s; the watch sees it within the keep-alive's next look.
    expect(Date.now() - startedAt).toBeLessThan(4_000);
    expect(readFileSync(`/proc/${pid}/stat`, "utf8")).toMatch(/\) Z /);
  } finally {
    parent.kill("SIGKILL");
  }
});

/** Every process's pid. */
function allPids(): number[] {
  return readdirSync("/proc")
    .filter((e) => /^\d+$/.test(e))
    .map(Number);
}

/** The pid of the process listening on host:port. */
function listenerPid(host: string, port: number): number {
  const out = execFileSync("ss", ["-Hltnp", `src ${host}:${port}`], { encoding: "utf8" });
  const pid = /pid=(\d+)/.exec(out)?.[1];
  if (pid === undefined) throw new Error(`nothing listens on ${host}:${port}: ${out}`);
  return Number(pid);
}

/** A process's command line, spaces between its arguments ("" once it is gone). */
function commandOf(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").replaceAll("\0", " ");
  } catch {
    return "";
  }
}

/** Every process below `root` (children, their children, …). */
function descendantsOf(root: number): number[] {
  const parents = new Map<number, number>();
  for (const entry of readdirSync("/proc").filter((e) => /^\d+$/.test(e))) {
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      parents.set(Number(entry), Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]));
    } catch {
      // exited meanwhile
    }
  }
  const found: number[] = [];
  const visit = (pid: number): void => {
    for (const [child, parent] of parents) {
      if (parent !== pid) continue;
      found.push(child);
      visit(child);
    }
  };
  visit(root);
  return found;
}
