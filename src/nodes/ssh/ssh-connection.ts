/**
 * One SSH connection per node, shared by everyone who talks to that node: connects lazily, verifies
 * the host key against known_hosts, sends keepalives, reconnects with exponential back-off after a
 * drop, and caps concurrent channels (OpenSSH's MaxSessions defaults to 10 per connection).
 */
import { createRequire } from "node:module";
import { homedir } from "node:os";
import { join } from "node:path";
import type { AuthMethod, BaseAgent, Client, ClientChannel, ConnectConfig, IdentityCallback, ParsedKey, SFTPWrapper, SignCallback, SigningRequestOptions } from "ssh2";
import { isNearLocal, ShardctlError } from "../../errors/index.js";
import { FileRefusedError, readRegularFile } from "../../files/index.js";
import type { NodeConfig } from "../types.js";
import { joinHostPort } from "../host-port.js";
import { appendKnownHost, fingerprint, keyTypeOf, knownHostsName, knownHostsNames, knownKeyTypes, readKnownHosts, verifyHostKey } from "./known-hosts.js";
import { sshKeepalive } from "./keepalive.js";
import { expandHome, readSshConfig } from "./ssh-config.js";

export interface SshOptions {
  /** known_hosts file. Default ~/.ssh/known_hosts. */
  knownHostsPath?: string;
  /** ssh client config consulted for aliases. Default ~/.ssh/config. */
  sshConfigPath?: string;
  /** ssh-agent socket. Default $SSH_AUTH_SOCK. */
  agentSocket?: string;
  /** Keepalive interval, ms. Default 1000 (3 unanswered → connection dropped, see keepalive.ts). */
  keepaliveIntervalMs?: number;
  /** Unanswered keepalives before the connection is dropped. Default 3. */
  keepaliveCountMax?: number;
  /** Handshake deadline, ms. Default 4000. */
  connectDeadlineMs?: number;
  /** Concurrent channels per connection. Default 8 (below OpenSSH's MaxSessions 10). */
  maxChannels?: number;
}

/** Resolved address and credentials of a node. */
export interface SshTarget {
  host: string;
  port: number;
  user: string;
  identityFiles: string[];
  /** Where `identityFiles` come from, for messages: "identity_file", "IdentityFile in ~/.ssh/config", "the default identity file". */
  identitySetting: string;
}

/** Longest wait between reconnection attempts, ms. */
const reconnectCapMs = 2_000;

/**
 * A connection whose keepalives are answered but on which no command starts (its sessions never
 * print the shell's pid: an sshd wedged after authentication, a forced command that hangs, a
 * node-side hang tied to that one connection) is dropped by nothing else. After this many
 * commands in a row ran out of their deadlines without starting, and `retireAfterMs` without one
 * that started, it is retired: the next question opens a fresh connection.
 */
const retireAfterUnstarted = 3;
/** See retireAfterUnstarted, ms: a node whose shell starts slowly (a loaded one) still starts a command within it. */
const retireAfterMs = 10_000;

const defaultIdentityFiles = ["id_ed25519", "id_ecdsa", "id_rsa"].map((f) => join(homedir(), ".ssh", f));
const defaultIdentitySetting = "the default identity file";

/** The OpenSSH client files connections read: the ssh config and known_hosts, given or the user's own. */
export function sshClientFiles(options: Pick<SshOptions, "sshConfigPath" | "knownHostsPath">): { sshConfig: string; knownHosts: string } {
  return {
    sshConfig: options.sshConfigPath ?? join(homedir(), ".ssh", "config"),
    knownHosts: options.knownHostsPath ?? join(homedir(), ".ssh", "known_hosts"),
  };
}

export async function resolveTarget(node: NodeConfig, options: SshOptions): Promise<SshTarget> {
  const sshConfigPath = sshClientFiles(options).sshConfig;
  const alias = await readSshConfig(sshConfigPath, node.host);
  if (alias.proxy !== undefined) {
    throw new ShardctlError(
      "SshConfigUnsupported",
      `node ${node.name}: ${sshConfigPath} reaches ${node.host} through ${alias.proxy.keyword} ${alias.proxy.value}, which shardctl does not follow (it connects straight to the host). ` +
        `Give [nodes.${node.name}] a host this machine reaches directly (its address on the same network or VPN), or run the daemon on a machine that does`,
      { terminal: true },
    );
  }
  // A node's explicit settings win (an explicit 22 too), then the ssh config's, then OpenSSH's default.
  const port = node.port ?? alias.port ?? 22;
  const [identityFiles, identitySetting] =
    node.identityFile !== undefined
      ? [[expandHome(node.identityFile)], "identity_file"]
      : alias.identityFiles.length > 0
        ? [alias.identityFiles, `IdentityFile in ${sshConfigPath}`]
        : [defaultIdentityFiles, defaultIdentitySetting];
  return {
    host: alias.hostName ?? node.host,
    port,
    user: node.user ?? alias.user ?? process.env.USER ?? "root",
    identityFiles,
    identitySetting,
  };
}

export class SshConnection {
  private client: Client | undefined;
  private connecting: Promise<Client> | undefined;
  private sftpSession: Promise<SFTPWrapper> | undefined;
  private failures = 0;
  private lastFailureAt = 0;
  private lastFailureMessage: string | undefined;
  /** The last attempt's failure when it was a refusal waiting does not cure (terminal: a host key, an authentication). */
  private lastRefusal: ShardctlError | undefined;
  private active = 0;
  private readonly waiters: Array<() => void> = [];
  private closed = false;
  /** Clients still shaking hands: a close ends them too, so none outlives the pool. */
  private readonly handshaking = new Set<Client>();
  /** Commands on the current client that ran out of their deadlines without starting, in a row. */
  private unstarted = 0;
  /** When the first command of the current streak of unstarted ones ran out of its deadline, performance.now() ms. */
  private streakSince: number | undefined;
  /** The client the SFTP session was opened on. */
  private sftpClient: Client | undefined;
  /** The look that retires the current client, when it is due (see noteCommand). */
  private retiring: NodeJS.Timeout | undefined;

  constructor(
    readonly node: NodeConfig,
    private readonly options: SshOptions,
  ) {}

  /** A connected client, connecting (after the back-off delay of earlier failures) when needed. */
  async get(): Promise<Client> {
    this.throwIfClosed();
    if (this.client !== undefined) return this.client;
    this.connecting ??= this.connect().finally(() => {
      this.connecting = undefined;
    });
    return this.connecting;
  }

  /** A client is connected (a question may still wait for a channel slot). */
  get connected(): boolean {
    return this.client !== undefined;
  }

  /** The error of the last connection attempt when it failed, none once one succeeds. */
  get lastFailure(): string | undefined {
    return this.lastFailureMessage;
  }

  /**
   * Whether a command on `client` started (its shell printed its pid, or it ended) or ran out of its
   * deadline with no sign of starting; the connection is retired after too many of the latter (see
   * retireAfterUnstarted).
   */
  noteCommand(client: Client, started: boolean): void {
    if (client !== this.client) return;
    if (started) {
      this.unstarted = 0;
      this.streakSince = undefined;
      clearTimeout(this.retiring);
      this.retiring = undefined;
      return;
    }
    // The streak is timed from its first command that did not start: a connection idle for a while
    // is not retired the moment a few slow starts (a loaded node) run out of their deadlines.
    this.streakSince ??= performance.now();
    if (++this.unstarted < retireAfterUnstarted || this.retiring !== undefined) return;
    // Looked at when the time is up, not at the next note: by then every channel slot may be held
    // by a command waiting to start, and no question reaches the node to note anything.
    this.retiring = setTimeout(
      () => {
        this.retiring = undefined;
        if (client !== this.client || this.unstarted < retireAfterUnstarted) return;
        // Ended at once: its channel slots, held by commands that never started, are what the
        // next questions wait for. What ran on it is failed as a dropped connection's is.
        this.client = undefined;
        if (this.sftpClient === client) this.sftpSession = undefined;
        client.end();
        setTimeout(() => client.destroy(), 1_000).unref();
      },
      Math.max(0, this.streakSince + retireAfterMs - performance.now()),
    );
    this.retiring.unref();
  }

  /** Run `use` on a fresh channel slot; at most maxChannels at once. */
  async withChannel<T>(use: (client: Client) => Promise<T>): Promise<T> {
    const max = this.options.maxChannels ?? 8;
    // A released slot is handed straight to the next waiter (the count never dips), so no caller
    // arriving in between can take it and push the channels past the cap.
    if (this.active >= max) await new Promise<void>((resolve) => this.waiters.push(resolve));
    else this.active++;
    try {
      return await use(await this.get());
    } finally {
      const next = this.waiters.shift();
      if (next !== undefined) next();
      else this.active--;
    }
  }

  /** The connection's one SFTP session (it occupies one channel for the connection's life). */
  async sftp(): Promise<SFTPWrapper> {
    const client = await this.get();
    if (this.sftpSession === undefined) this.sftpClient = client;
    const session: Promise<SFTPWrapper> = (this.sftpSession ??= this.openSftp(client).then(
      (sftp) => {
        // A session of a client given up on closes late: the current one's is not dropped for it.
        sftp.on("close", () => {
          if (this.sftpSession === session) this.sftpSession = undefined;
        });
        // Every operation in flight on the one session listens for its close (an abandoned read
        // keeps its listener until it settles): many at once are expected, not a leak.
        sftp.setMaxListeners(0);
        return sftp;
      },
      (error: unknown) => {
        if (this.sftpSession === session) this.sftpSession = undefined;
        throw error;
      },
    ));
    return session;
  }

  /**
   * `use` on an SFTP session of its own, on one of the channel slots, ended once `use` settles. For
   * work that must be stoppable: ending its session is what stops a push's writes in flight, which have no
   * other way to be cut; the shared session, and the work on it, go on.
   */
  async withOwnSftp<T>(use: (sftp: SFTPWrapper) => Promise<T>): Promise<T> {
    return this.withChannel(async (client) => {
      const sftp = await this.openSftp(client);
      try {
        return await use(sftp);
      } finally {
        sftp.end();
      }
    });
  }

  private openSftp(client: Client): Promise<SFTPWrapper> {
    return new Promise<SFTPWrapper>((resolve, reject) => {
      client.sftp((error, sftp) => {
        if (!error) return resolve(sftp);
        // A connection that dropped (a partition the keepalive gave up on) fails its channel
        // requests just before it closes, in the same turn: told apart once that turn is over.
        setImmediate(() => {
          const lost = this.client !== client;
          const advice = lost ? "" : sftpAdvice(error.message, this.node.user ?? "its user");
          reject(new ShardctlError(lost ? "NodeUnreachable" : "NodeCommandFailed", `node ${this.node.name}: SFTP unavailable: ${error.message}${advice}`));
        });
      });
    });
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.retiring);
    for (const pending of this.handshaking) pending.destroy();
    this.handshaking.clear();
    const client = this.client;
    this.client = undefined;
    if (client === undefined) return;
    await new Promise<void>((resolve) => {
      client.once("close", () => resolve());
      client.end();
      setTimeout(resolve, 1_000).unref();
    });
  }

  private throwIfClosed(): void {
    if (this.closed) throw this.closedError();
  }

  private closedError(): ShardctlError {
    return new ShardctlError("NodeClosed", `node ${this.node.name}: connection pool is closed`);
  }

  private async connect(): Promise<Client> {
    // Back-off: 250 ms doubling per consecutive failure, capped at 2 s, so a node whose sshd comes
    // back (or whose partition heals) is observed again within 2 s plus one handshake.
    if (this.failures > 0) {
      const wait = Math.min(250 * 2 ** (this.failures - 1), reconnectCapMs) - (performance.now() - this.lastFailureAt);
      // A refusal that waiting does not cure (a changed host key, a key the node refuses) is the
      // answer until the back-off allows the next attempt: a question with a 2 s deadline hears it
      // at once, not as a timeout after waiting out the back-off.
      if (wait > 0 && this.lastRefusal !== undefined) throw this.lastRefusal;
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    }
    try {
      const client = await this.handshake();
      this.failures = 0;
      this.lastFailureMessage = undefined;
      this.lastRefusal = undefined;
      return client;
    } catch (error) {
      this.failures++;
      this.lastFailureAt = performance.now();
      this.lastFailureMessage = error instanceof Error ? error.message : String(error);
      this.lastRefusal = error instanceof ShardctlError && error.terminal ? error : undefined;
      throw error;
    }
  }

  private async handshake(): Promise<Client> {
    const target = await resolveTarget(this.node, this.options);
    const knownHostsPath = sshClientFiles(this.options).knownHosts;
    const entries = await readKnownHosts(knownHostsPath);
    // Recorded under its name as OpenSSH writes it; looked up under the name as written too.
    const names = knownHostsNames(target.host, target.port);
    const name = names[0]!;
    let refusal: ShardctlError | undefined;
    let pendingRecord: { keyType: string; key: string } | undefined;

    const hostVerifier = (blob: Buffer): boolean => {
      const keyType = keyTypeOf(blob);
      const key = blob.toString("base64");
      const verdict = verifyHostKey(entries, names, keyType, key);
      if (verdict.kind === "known") return true;
      if (verdict.kind === "unknown" && this.node.hostKeyPolicy === "accept-new") {
        pendingRecord = { keyType, key };
        return true;
      }
      refusal = hostKeyRefusal(this.node.name, target, knownHostsPath, verdict, keyType, key);
      return false;
    };

    const { keys, passedOver, offered, preferred } = await readIdentityKeys(this.node.name, target);
    const privateKey = keys[0]?.privateKey;
    const keyPath = keys[0]?.path;
    const agent = this.options.agentSocket ?? process.env.SSH_AUTH_SOCK;
    // What to say of the keys we could not use, after an authentication failure or when no agent runs.
    const unlockHint = passedOver.length === 0 ? "" : `; ${passedOver.map(describePassedOver).join("; ")}`;
    if (privateKey === undefined && agent === undefined) {
      const tried = passedOver.length > 0 ? "no usable identity file" : `no identity file (tried ${target.identityFiles.join(", ")})`;
      throw new ShardctlError("SshAuthFailed", `node ${this.node.name}: ${tried} and no ssh-agent (SSH_AUTH_SOCK)${unlockHint}${localHint(this.node.host)}`, {
        terminal: true,
      });
    }
    // As OpenSSH does: ask first for the key types known_hosts holds for this host, so a server with
    // several host keys presents the one we can check. (ssh2's `prepend` ignores names already in its
    // defaults, so the whole list is given; types ssh2 cannot verify are left out.)
    const known = knownKeyTypes(entries, names)
      .flatMap((t) => (t === "ssh-rsa" ? ["rsa-sha2-512", "rsa-sha2-256", "ssh-rsa"] : [t]))
      .filter((t) => ssh2Constants().SUPPORTED_SERVER_HOST_KEY.includes(t));
    const hostKeyOrder = [...new Set([...known, ...ssh2Constants().DEFAULT_SERVER_HOST_KEY])];
    const config: ConnectConfig = {
      host: target.host,
      port: target.port,
      username: target.user,
      // Each usable identity file in turn, then the agent's keys (the identity files' first).
      authHandler: [
        ...keys.map((k): AuthMethod => ({ type: "publickey", username: target.user, key: k.privateKey }) as AuthMethod),
        ...(agent === undefined ? [] : [{ type: "agent", username: target.user, agent: await agentPreferring(agent, preferred, offered) } as AuthMethod]),
      ],
      hostVerifier,
      keepaliveInterval: this.options.keepaliveIntervalMs ?? sshKeepalive.intervalMs,
      keepaliveCountMax: this.options.keepaliveCountMax ?? sshKeepalive.countMax,
      // The handshake's deadline is kept below (handshakeDeadlineMs): it grows with the round trip.
      readyTimeout: 0,
      ...(known.length > 0 ? { algorithms: { serverHostKey: hostKeyOrder as never } } : {}),
    };
    // Closed while the back-off or the reads above went on: no connection is begun.
    const { Client } = await loadSsh2();
    this.throwIfClosed();
    const client = new Client();
    // ssh2 can report more than one error for one connection (a handshake timeout, then the lost
    // socket): the first decides the handshake below, the others must not reach the process as
    // uncaught exceptions, which would end the daemon.
    client.on("error", () => {});
    this.handshaking.add(client);
    // How far the handshake got, for a timeout's words: a host that never took the TCP connection
    // (down, cut off, a firewall dropping packets) is not an sshd that took it and said nothing.
    const baseMs = this.options.connectDeadlineMs ?? sshKeepalive.connectDeadlineMs;
    const progress: HandshakeProgress = { connected: false, keysExchanged: false, baseMs, deadlineMs: baseMs };
    const began = performance.now();
    // Out of time as ssh2 itself says it (its own deadline is off): the words below read it.
    const timeUp = (): void => {
      client.emit("error", Object.assign(new Error("Timed out while waiting for handshake"), { level: "client-timeout" }));
      client.destroy();
    };
    let deadline = setTimeout(timeUp, progress.deadlineMs);
    client.once("connect", () => {
      progress.connected = true;
      progress.connectMs = Math.round(performance.now() - began);
      // Over a long round trip the rest of the handshake needs longer: the deadline grows with it.
      progress.deadlineMs = handshakeDeadlineMs(baseMs, progress.connectMs);
      clearTimeout(deadline);
      deadline = setTimeout(timeUp, Math.max(0, progress.deadlineMs - (performance.now() - began)));
    });
    client.once("handshake", () => (progress.keysExchanged = true));
    await new Promise<void>((resolve, reject) => {
      client.once("ready", () => resolve());
      // Destroyed by close() while shaking hands: no "error" comes, only "close".
      client.once("close", () => reject(this.closedError()));
      client.once("error", (error: Error & { level?: string }) => {
        if (refusal !== undefined) return reject(refusal);
        // The server cutting the offers short, or an agent that is not there, is authentication too.
        const staleAgent = /failed to connect to agent/i.test(error.message);
        const auth = error.level === "client-authentication" || staleAgent || /too many authentication failures/i.test(error.message);
        const agentHint = staleAgent
          ? `; SSH_AUTH_SOCK (${agent ?? ""}) names no running ssh-agent (a service started with an old environment?): start the agent and ssh-add the key, or unset SSH_AUTH_SOCK for the daemon`
          : "";
        reject(
          new ShardctlError(
            auth ? "SshAuthFailed" : "NodeUnreachable",
            auth
              ? `node ${this.node.name}: authentication as ${target.user} failed: ${error.message}${unlockHint}${agentHint}; ${authRefusalHint(this.node.name, target, keyPath, agent)}`
              : `node ${this.node.name}: cannot connect to ${joinHostPort(target.host, target.port)}: ${error.message}${timeoutWords(error, progress)}${connectHint(error, this.node.name, this.node.host, target.port)}`,
            { terminal: auth, cause: error },
          ),
        );
      });
      client.connect(config);
    })
      .catch((error: unknown) => {
        // A failed handshake leaves nothing to keep: its socket is closed now, not when it times out.
        client.destroy();
        throw error;
      })
      .finally(() => {
        clearTimeout(deadline);
        this.handshaking.delete(client);
      });
    if (pendingRecord !== undefined) await appendKnownHost(knownHostsPath, name, pendingRecord.keyType, pendingRecord.key);
    // Closed while the handshake or the known_hosts write went on: this connection is not kept.
    if (this.closed) {
      client.end();
      this.throwIfClosed();
    }
    client.once("close", () => {
      if (this.client === client) this.client = undefined;
      if (this.sftpClient === client) this.sftpSession = undefined;
    });
    client.setNoDelay(true);
    this.client = client;
    this.unstarted = 0;
    this.streakSince = undefined;
    clearTimeout(this.retiring);
    this.retiring = undefined;
    return client;
  }
}

/** What to check when the connection itself failed: nothing listening, or a name that does not resolve. */
function connectHint(error: Error & { code?: unknown }, node: string, host: string, port: number): string {
  if (error.code === "ECONNREFUSED")
    return ` (nothing listens on port ${port} there: is sshd running, and is the port right, in [nodes.${node}] or the ssh config?)${localHint(host)}`;
  if (error.code === "ENOTFOUND" || error.code === "EAI_AGAIN")
    return ` (the name does not resolve on this machine: check the host, in [nodes.${node}] or the ssh config)${localHint(host)}`;
  return "";
}

/** A host one typo away from "local" (the control machine, reached without SSH) most likely meant it. */
function localHint(host: string): string {
  return isNearLocal(host) ? `; host = ${JSON.stringify(host)} is dialled over SSH: did you mean "local", this machine?` : "";
}

/** How far a handshake got, and the deadline it had. */
interface HandshakeProgress {
  connected: boolean;
  /** How long the TCP connection took from the start (its name's lookup included), ms: about one round trip on a path whose name resolves at once. */
  connectMs?: number;
  keysExchanged: boolean;
  /** The deadline on a LAN, ms, and the one the handshake had. */
  baseMs: number;
  deadlineMs: number;
}

/**
 * The handshake's deadline once its TCP connection took `connectMs`, ms: the base (4 s by default,
 * `connectDeadlineMs`) or 15 × that time, whichever is longer. A handshake with its
 * authentication takes about 9 round trips: about 7.4 s over a path of 400 ms each way (a relayed
 * VPN between continents, a saturated link), where a LAN's takes milliseconds.
 */
export function handshakeDeadlineMs(baseMs: number, connectMs: number): number {
  return Math.max(baseMs, 15 * connectMs);
}

/**
 * What a handshake that ran out of time ("Timed out while waiting for handshake") got to, in
 * words; "" for any other error.
 */
function timeoutWords(error: Error & { level?: string }, progress: HandshakeProgress): string {
  if (error.level !== "client-timeout") return "";
  const { deadlineMs } = progress;
  if (!progress.connected) return ` (no TCP connection within ${deadlineMs} ms: the host is down or cut off, or a firewall drops its packets)`;
  // Said when the deadline grew past the LAN's: why it was what it was.
  const roundTrip =
    progress.connectMs !== undefined && deadlineMs > progress.baseMs ? `; its TCP connection took ${progress.connectMs} ms, and the deadline allowed 15 times that` : "";
  if (!progress.keysExchanged)
    return ` (the TCP connection was accepted, but the SSH server there did not complete its greeting and key exchange within ${deadlineMs} ms: its sshd hangs, being stopped, overloaded or out of resources, or something other than sshd listens on that port${roundTrip})`;
  return ` (the SSH server there took the connection and exchanged keys, but did not finish authentication within ${deadlineMs} ms: its sshd or what it asks, such as PAM or DNS, hangs${roundTrip})`;
}

function hostKeyRefusal(
  node: string,
  target: SshTarget,
  knownHostsPath: string,
  verdict: Exclude<ReturnType<typeof verifyHostKey>, { kind: "known" }>,
  keyType: string,
  key: string,
): ShardctlError {
  const where = joinHostPort(target.host, target.port);
  const got = `${keyType} ${fingerprint(key)}`;
  const portFlag = target.port === 22 ? "" : `-p ${target.port} `;
  if (verdict.kind === "unknown") {
    return new ShardctlError(
      "HostKeyUnknown",
      `node ${node}: host key of ${where} (${got}) is not in ${knownHostsPath}. Check the fingerprint out of band, then record it with ` +
        `\`ssh-keyscan ${portFlag}${target.host} >> ${knownHostsPath}\`, or set host_key_policy = "accept-new" for this node`,
      { terminal: true },
    );
  }
  if (verdict.kind === "other-types") {
    return new ShardctlError(
      "HostKeyUnknown",
      `node ${node}: ${where} is in ${knownHostsPath} with ${verdict.knownTypes.join(", ")} keys only, but offered ${got}. ` +
        `Check the fingerprint out of band, then record it with \`ssh-keyscan -t ${keyType} ${portFlag}${target.host} >> ${knownHostsPath}\` ` +
        '(host_key_policy = "accept-new" does not apply to a host that is already known)',
      { terminal: true },
    );
  }
  if (verdict.kind === "revoked") {
    return new ShardctlError("HostKeyChanged", `node ${node}: host key of ${where} (${got}) is marked @revoked in ${knownHostsPath}:${verdict.line}`, { terminal: true });
  }
  return new ShardctlError(
    "HostKeyChanged",
    `node ${node}: host key of ${where} has CHANGED: the server offered ${got} but ${knownHostsPath}:${verdict.line} has ${verdict.knownFingerprint}. ` +
      `This may be an attack. If the machine was legitimately reinstalled, remove the old entry with ` +
      `\`ssh-keygen -R '${knownHostsName(target.host, target.port)}' -f ${knownHostsPath}\` and record the new key`,
    { terminal: true },
  );
}

/** Largest private key read, bytes (1 MiB): a key file is a few KB. */
const maxKeyBytes = 1024 * 1024;

/**
 * An identity file that was not used: one named in the settings that cannot be read (missing, no
 * permission), one protected by a passphrase, or no private key ssh2 can use.
 */
interface PassedOverKey {
  path: string;
  setting: string;
  /** Why it could not be read (the system's words), for a file that could not be. */
  unreadable?: string;
  /** Undefined for a key protected by a passphrase. */
  problem?: string;
}

function describePassedOver(key: PassedOverKey): string {
  if (key.unreadable !== undefined) return `${key.setting} ${key.path} cannot be read (${key.unreadable})`;
  if (key.problem !== undefined) return `${key.setting} ${key.path} is not a private key shardctl can use (${key.problem})`;
  return `${key.path} is protected by a passphrase, which shardctl never asks for: load it into ssh-agent (\`ssh-add ${key.path}\`) and run shardctl with SSH_AUTH_SOCK set, or name a key without a passphrase in identity_file`;
}

/**
 * What a refused login offered and what to do: the server's "All configured authentication methods
 * failed" says neither which key was tried nor where it must be accepted.
 */
function authRefusalHint(node: string, target: SshTarget, keyPath: string | undefined, agent: string | undefined): string {
  const offered = [...(keyPath === undefined ? [] : [`${target.identitySetting} ${keyPath}`]), ...(agent === undefined ? [] : ["the keys of ssh-agent"])].join(" and ");
  const portFlag = target.port === 22 ? "" : ` -p ${target.port}`;
  const copy = keyPath === undefined ? "" : ` (ssh-copy-id -i ${keyPath}.pub${portFlag} ${target.user}@${target.host})`;
  return `${target.host} accepted none of what was offered (${offered}) for ${target.user}: add the public key to ${target.user}'s ~/.ssh/authorized_keys there${copy}, or correct user or identity_file in [nodes.${node}]`;
}

/**
 * The target's identity files that can be read and used, in order (OpenSSH offers each in turn: a
 * `Host *` IdentityFile before a host's own must not hide the host's); none when none can (the agent
 * may still authenticate). As OpenSSH does, a key that cannot be used here is passed over for the
 * agent, which may hold it: one protected by a passphrase (the agent holds it unlocked), a public
 * key (`IdentityFile ~/.ssh/key.pub` names an agent's key), a format ssh2 does not read. Each is
 * listed in `passedOver` for the messages, as is a file the settings name that cannot be read (a
 * missing default identity file is the usual case and is not). One that is not a regular file (a
 * FIFO would block the read for ever) or is over the cap is an error naming the setting and the path.
 * `offered`: the public halves of the keys offered from their files; `preferred`: those of the files
 * passed over (from the key, or its `.pub`), which the agent offers first.
 */
async function readIdentityKeys(
  node: string,
  target: SshTarget,
): Promise<{ keys: Array<{ privateKey: Buffer; path: string }>; passedOver: PassedOverKey[]; offered: Buffer[]; preferred: Buffer[] }> {
  const { utils } = await loadSsh2();
  const passedOver: PassedOverKey[] = [];
  const keys: Array<{ privateKey: Buffer; path: string }> = [];
  // The public halves of the keys offered from their files, and of those passed over for the agent.
  const offered: Buffer[] = [];
  const preferred: Buffer[] = [];
  const publicHalfOf = async (path: string): Promise<void> => {
    const text = await readRegularFile(path, { maxBytes: maxKeyBytes, what: "SSH public key" }).catch(() => undefined);
    const parsed = text === undefined ? undefined : utils.parseKey(text);
    if (parsed !== undefined && !(parsed instanceof Error)) preferred.push(parsed.getPublicSSH());
  };
  for (const path of target.identityFiles) {
    let key: Buffer;
    try {
      key = await readRegularFile(path, { maxBytes: maxKeyBytes, what: "SSH private key" });
    } catch (error) {
      if (error instanceof FileRefusedError) {
        throw new ShardctlError(error.reason, `node ${node}: ${target.identitySetting} ${path}: ${error.detail}`, { terminal: true, cause: error });
      }
      if (target.identitySetting !== defaultIdentitySetting) {
        passedOver.push({ path, setting: target.identitySetting, unreadable: error instanceof Error ? error.message.replace(/, open '.*'$/, "") : String(error) });
      }
      await publicHalfOf(`${path}.pub`);
      continue;
    }
    const parsed = utils.parseKey(key);
    if (parsed instanceof Error) {
      passedOver.push({ path, setting: target.identitySetting, ...(/encrypted|passphrase/i.test(parsed.message) ? {} : { problem: parsed.message }) });
      await publicHalfOf(`${path}.pub`);
    } else if (!parsed.isPrivateKey()) {
      passedOver.push({ path, setting: target.identitySetting, problem: "it is a public key" });
      preferred.push(parsed.getPublicSSH());
    } else if (!offered.some((p) => p.equals(parsed.getPublicSSH()))) {
      // Each key once: a server counts every offer against its MaxAuthTries (6 by default), and a
      // `Host *` IdentityFile may name the host's own key again.
      keys.push({ privateKey: key, path });
      offered.push(parsed.getPublicSSH());
    }
  }
  return { keys, passedOver, offered, preferred };
}

/**
 * ssh-agent at `socket`, offering the keys of identity files it could not read itself (locked by a
 * passphrase, named by their public half) before its others, as OpenSSH does, and none already
 * offered from a file: the server counts every offer against its MaxAuthTries (6 by default), and an
 * agent holding more keys would otherwise be cut off ("Too many authentication failures") before it
 * offers the one the node accepts.
 */
async function agentPreferring(socket: string, preferred: readonly Buffer[], offered: readonly Buffer[]): Promise<BaseAgent> {
  const { BaseAgent: Base, OpenSSHAgent: Agent } = await loadSsh2();
  const inner = new Agent(socket);
  const rank = (key: ParsedKey): number => (preferred.some((p) => p.equals(key.getPublicSSH())) ? 0 : 1);
  class PreferringAgent extends Base<ParsedKey> {
    getIdentities(cb: IdentityCallback<ParsedKey>): void {
      inner.getIdentities((error, keys) => {
        if (error) return cb(error);
        // Array.prototype.sort is stable: the agent's own order is kept within each rank.
        const fresh = (keys ?? []).filter((k) => !offered.some((o) => o.equals((k as ParsedKey).getPublicSSH())));
        cb(
          null,
          fresh.sort((a, b) => rank(a as ParsedKey) - rank(b as ParsedKey)),
        );
      });
    }
    sign(pubKey: ParsedKey, data: Buffer, options: SigningRequestOptions | SignCallback, cb?: SignCallback): void {
      if (typeof options === "function") inner.sign(pubKey, data, {}, options);
      else inner.sign(pubKey, data, options, cb);
    }
  }
  return new PreferringAgent() as BaseAgent;
}

export type { ClientChannel };

// ssh2 (and what it pulls in) is loaded at the first connection, not with this module: most
// shardctl commands (status, diff, plan of local nodes) never open one, and loading it took about
// 0.1 s of each command's start.

/** ssh2's CommonJS exports (its `utils` is no named export Node's ESM loader can see). */
function loadSsh2(): Promise<typeof import("ssh2")> {
  return (ssh2Module ??= import("ssh2").then((m) => (m as { default: typeof import("ssh2") }).default));
}
let ssh2Module: Promise<typeof import("ssh2")> | undefined;

/** ssh2's own lists (lib/protocol/constants.js), read once: what it offers by default and can verify. */
function ssh2Constants(): { readonly DEFAULT_SERVER_HOST_KEY: readonly string[]; readonly SUPPORTED_SERVER_HOST_KEY: readonly string[] } {
  return (constants ??= createRequire(import.meta.url)("ssh2/lib/protocol/constants.js") as ReturnType<typeof ssh2Constants>);
}
let constants: ReturnType<typeof ssh2Constants> | undefined;

/**
 * What to do about an SFTP session that did not open. An SFTP server the user's shell starts
 * (OpenSSH's default `Subsystem sftp /usr/lib/openssh/sftp-server`) speaks after the shell's
 * start-up files: a line they print (a banner in ~/.bashrc, which bash reads for ssh sessions too)
 * is read as the length of a packet, billions of bytes long.
 */
function sftpAdvice(message: string, user: string): string {
  if (/packet length|invalid packet|expected version|unknown packet type/i.test(message)) {
    return ` (the SFTP server's first words were not SFTP: the start-up files of ${user}'s login shell there (~/.bashrc, ~/.zshenv, ~/.profile) print text for ssh sessions, which must print nothing unless interactive (\`[[ $- == *i* ]] || return\` at the top of ~/.bashrc); or set \`Subsystem sftp internal-sftp\` in its sshd_config, which runs no shell)`;
  }
  return " (a push needs the node's sshd to offer SFTP: a `Subsystem sftp` line in its sshd_config)";
}
