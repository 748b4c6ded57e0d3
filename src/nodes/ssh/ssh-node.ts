/** A node reached over SSH: commands on channels of the pooled connection, files over SFTP. */
import { randomBytes } from "node:crypto";
import type { Client, ClientChannel, SFTPWrapper } from "ssh2";
import { ShardctlError } from "../../errors/index.js";
import { abortError, listenForAbort, untilAborted } from "../abort-error.js";
import { setDeadline, type Deadline } from "../deadline.js";
import { askPort } from "../port-answer.js";
import { anyShellRuns, quoteArg, quoteArgv } from "../quote.js";
import { ShellNode } from "../shell-node.js";
import type { CommandResult, NodeAccess, NodeConfig, PortAnswer, PutOptions, RunOptions } from "../types.js";
import { joinHostPort } from "../host-port.js";
import { silentPeerBoundMs } from "./keepalive.js";
import { resolveTarget, SshConnection, type SshOptions } from "./ssh-connection.js";
import { maxWritesInFlight, putWindowed, writeBytes } from "./windowed-put.js";

/** Default per-command deadline, ms. */
const defaultDeadlineMs = 30_000;

/**
 * How long a command stopped before its shell printed its pid keeps its channel (and its slot) open
 * for that pid, ms: the pid is killed the moment it comes.
 */
const abandonAfterMs = 60_000;

/** Exit watches per watch connection: below OpenSSH's default MaxSessions (10). */
const watchesPerConnection = 9;

export class SshNode extends ShellNode implements NodeAccess {
  readonly kind = "ssh" as const;
  readonly connection: SshConnection;
  /**
   * Exit watches hold a session each for as long as their process lives, so they ride connections
   * of their own (up to 9 watches each): commands on the main connection never wait behind them,
   * however many processes a node runs.
   */
  private readonly watchLanes: Array<{ connection: SshConnection; watches: number }> = [];

  /** `connection` lets several configs of one machine (say, two model dirs) share its connection. */
  constructor(
    readonly config: NodeConfig,
    private readonly options: SshOptions = {},
    connection?: SshConnection,
  ) {
    super();
    this.connection = connection ?? new SshConnection(config, options);
  }

  get connected(): boolean {
    return this.connection.connected;
  }

  /** The host name or address this node is really reached at (an ssh config alias's HostName applied). */
  async targetHost(): Promise<string> {
    return (await resolveTarget(this.config, this.options)).host;
  }

  /**
   * The IP address the SSH connection reached (connecting when none is up): a name with several
   * addresses is tried address by address, and the one that answered is this machine's, not
   * necessarily the resolver's first. Undefined when it cannot be told.
   */
  async reachedAddress(): Promise<string | undefined> {
    const client = await this.connection.get();
    const address = (client as unknown as { _sock?: { remoteAddress?: string } })._sock?.remoteAddress;
    // An IPv4 peer on a dual-stack socket reads ::ffff:a.b.c.d.
    return address?.replace(/^::ffff:(\d+\.\d+\.\d+\.\d+)$/, "$1");
  }

  run(argv: string[], options: RunOptions = {}): Promise<CommandResult> {
    // An abort kills the command's process group on the node, as its deadline does.
    return this.exec(argv, { ...options, deadlineMs: options.deadlineMs ?? defaultDeadlineMs, ...(options.signal === undefined ? {} : { abort: options.signal }) });
  }

  protected async runWatch(argv: string[], signal: AbortSignal | undefined): Promise<CommandResult> {
    let lane = this.watchLanes.find((l) => l.watches < watchesPerConnection);
    if (lane === undefined) {
      lane = { connection: new SshConnection(this.config, this.options), watches: 0 };
      this.watchLanes.push(lane);
    }
    lane.watches++;
    try {
      // Its output past the pid (a keep-alive byte a second) is not kept: it lives as long as the process it watches.
      return await this.exec(argv, { deadlineMs: Number.POSITIVE_INFINITY, abort: signal, uncapped: true, pidOnly: true }, lane.connection);
    } finally {
      lane.watches--;
      if (lane.watches === 0) {
        this.watchLanes.splice(this.watchLanes.indexOf(lane), 1);
        void lane.connection.close();
      }
    }
  }

  private async exec(
    argv: string[],
    options: RunOptions & { abort?: AbortSignal; uncapped?: boolean; pidOnly?: boolean },
    connection: SshConnection = this.connection,
  ): Promise<CommandResult> {
    if (argv.length === 0) throw new TypeError("run needs a command");
    // The shell prints its pid first and then execs the command, so a deadline can kill it for sure
    // (OpenSSH ignores channel signal requests for sessions without a pty). sshd starts each session
    // with setsid, so that pid leads a process group holding the command's children too (curl and
    // head under a download): the deadline kills the group, and nothing of the command is left.
    // sshd hands the line to the user's login shell, which may be no POSIX shell (fish has no `$$`):
    // it only execs `sh` with the line as one quoted word, and the pid stays the session leader's.
    // The marker's line begins after a newline of its own: a start-up file's last words may end without one.
    const script = `echo; echo ${pidMarker}$$; ${options.cwd === undefined ? "" : `cd ${quoteArg(options.cwd)} && `}exec ${quoteArgv(argv)}`;
    const line = anyShellRuns(script);
    const started = performance.now();
    const once = (client: Client): Promise<CommandResult> =>
      new Promise<CommandResult>((resolve, reject) => {
        client.exec(line, (error, channel) => {
          if (error) return reject(error);
          // Listeners go on in this same tick: ssh2 may already be emitting the command's exit
          // status from the same TCP read, and an 'exit' event missed is an exit code lost.
          resolve(
            collect(
              channel,
              argv,
              started,
              options,
              (began) => connection.noteCommand(client, began),
              (pid) => {
                try {
                  client.exec(anyShellRuns(`kill -s KILL -- -${pid} 2>/dev/null || kill -s KILL ${pid}`), (killError, ch) => {
                    if (!killError) ch.on("close", () => {}).resume();
                  });
                } catch {
                  // The connection is already gone (ssh2 throws "Not connected" at once): no kill can
                  // reach the node over it, and the question is answered as stopped all the same.
                }
              },
            ),
          );
        });
      });
    // The server refuses sessions beyond its MaxSessions (10 by default) with "open failure";
    // long-lived watchers take sessions outside our cap, so wait for one to free up (up to 5 s).
    const retrying = async (client: Client): Promise<CommandResult> => {
      for (let attempt = 0; ; attempt++) {
        try {
          return await once(client);
        } catch (error) {
          if (!/open failure|open failed/i.test((error as Error).message) || attempt >= 25) throw error;
          await new Promise((r) => setTimeout(r, 200));
        }
      }
    };
    // The deadline covers the whole question, not only the command: connecting, waiting for a
    // channel slot and opening the channel hang for as long as a silent (partitioned) node stays
    // silent, and a caller with a deadline must get its answer in time all the same.
    let expired = false;
    // Whether the question got a connection: one that never did says why (a refused sshd is not a silent node).
    let reached = false;
    const guarded = async (client: Client): Promise<CommandResult> => {
      reached = true;
      if (expired) throw new Error(`no answer within ${options.deadlineMs} ms`);
      // Aborted while it waited for a connection or a channel: the command is not started at all.
      if (options.abort?.aborted === true) throw new Error("stopped before it started");
      return retrying(client);
    };
    const work = (async () => {
      try {
        // Long-lived watchers do not hold one of the capped slots (they would starve commands).
        if (options.uncapped) return await guarded(await connection.get());
        return await connection.withChannel(guarded);
      } catch (error) {
        if (error instanceof ShardctlError) throw error;
        throw new ShardctlError("NodeUnreachable", `node ${this.config.name}: ${argv[0]}: ${inWords((error as Error).message)}`, { cause: error });
      }
    })();
    const deadlineMs = options.deadlineMs ?? defaultDeadlineMs;
    // A watch (no deadline) ends when it is aborted, even while it still waits for its connection or
    // channel (a lossy or silent node): whoever stops the watch must not wait for that node. A
    // channel that opens later sees the abort and kills its command (collect); a connection still
    // being made is ended by the pool's close.
    if (!Number.isFinite(deadlineMs)) return options.abort === undefined ? work : untilCommandAborted(work, options.abort, argv, started);
    let timer: Deadline | undefined;
    const silence = new Promise<CommandResult>((resolve) => {
      timer = setDeadline(deadlineMs, () => {
        expired = true;
        // The attempt's error names the node already ("node n2: cannot connect to …"): said once.
        const last = connection.lastFailure?.replace(`node ${this.config.name}: `, "");
        const unreached = reached || connection.connected ? {} : { unreached: last === undefined ? "still connecting" : `the last attempt: ${last}` };
        const durationMs = Math.round(performance.now() - started);
        // A connection up now, after a wait longer than its keepalives let a silent node keep one.
        const answered = reached && connection.connected && durationMs > silentPeerBoundMs ? { nodeAnswered: true as const } : {};
        resolve({
          argv,
          exitCode: undefined,
          signal: "SIGKILL",
          stdout: "",
          stderr: "",
          timedOut: true,
          durationMs,
          ...unreached,
          ...answered,
        });
      });
    });
    // A question given up on still settles later (the connection drops within the keepalive bound).
    work.catch(() => undefined);
    try {
      // An abort answers at once, even while the question still waits for a connection or a channel.
      return await Promise.race([options.abort === undefined ? work : untilCommandAborted(work, options.abort, argv, started), silence]);
    } finally {
      timer?.clear();
    }
  }

  /**
   * `use` on the connection's SFTP session, failing as soon as the session closes: NodeUnreachable
   * when the connection dropped (a partitioned node is given up on by the keepalive), NodeFileError
   * when only the SFTP server ended. ssh2 fails the
   * requests pending at the drop, but an operation that then closes its remote handle (a push,
   * writeFile, readFile, a write stream) waits for that close on the dead channel for ever: without
   * this, a push cut off by a partition would hang its staging past every deadline, and after the
   * heal too.
   */
  private async withSftp<T>(what: string, use: (sftp: SFTPWrapper) => Promise<T>, onLost?: (error: Error) => void, session?: SFTPWrapper): Promise<T> {
    const sftp = session ?? (await this.connection.sftp());
    let closed: Promise<ShardctlError> | undefined;
    let onClose: (() => void) | undefined;
    const lost = new Promise<never>((_, reject) => {
      onClose = () => {
        // A connection that dropped closes in the same turn as its session: told apart once that
        // turn is over. A session that closed on a connection still up is the node's SFTP server
        // gone on its own (killed at a file size limit, `ulimit -f`; crashed), no partition.
        closed = new Promise((decided) =>
          setImmediate(() => {
            const error = this.connection.connected
              ? new ShardctlError(
                  "NodeFileError",
                  `node ${this.config.name}: the SFTP session ended while ${what}, though the SSH connection is up: the node's SFTP server exited (a file size limit of its user, \`ulimit -f\`; a crash; the node shutting down; sshd's log there says which)`,
                )
              : new ShardctlError("NodeUnreachable", `node ${this.config.name}: the connection closed while ${what}`);
            onLost?.(error);
            reject(error);
            decided(error);
          }),
        );
      };
      sftp.once("close", onClose);
    });
    // ssh2 fails the requests pending at a drop ("No response from server") just before the session
    // closes, in the same turn: an operation of one request (a rename, a read still opening its file)
    // fails that way, and is the same end of the session.
    const work = use(sftp).catch(async (error: unknown) => {
      await new Promise((next) => setImmediate(next));
      throw closed === undefined ? error : await closed;
    });
    work.catch(() => undefined);
    try {
      return await Promise.race([work, lost]);
    } finally {
      sftp.off("close", onClose!);
    }
  }

  async readFile(path: string): Promise<Buffer> {
    return this.withSftp(
      `reading ${path}`,
      (sftp) =>
        new Promise((resolve, reject) => sftp.readFile(path, (error, data) => (error ? reject(fileError(this.config.name, "read", path, error)) : resolve(data)))),
    );
  }

  async writeFile(path: string, data: string | Buffer, options: { mode?: number } = {}): Promise<void> {
    return this.withSftp(`writing ${path}`, (sftp) => this.writeFileOver(sftp, path, data, options));
  }

  private async writeFileOver(sftp: SFTPWrapper, path: string, data: string | Buffer, options: { mode?: number }): Promise<void> {
    const slash = path.lastIndexOf("/");
    const temp = `${path.slice(0, slash + 1)}.${path.slice(slash + 1)}.${process.pid}.${randomBytes(6).toString("hex")}.tmp`;
    try {
      await new Promise<void>((resolve, reject) =>
        sftp.writeFile(temp, data, { mode: options.mode ?? 0o644 }, (error) => (error ? reject(fileError(this.config.name, "write", path, error)) : resolve())),
      );
      // The open() mode is filtered by the server's umask; a secret's 0600 must be exact.
      await new Promise<void>((resolve, reject) => sftp.chmod(temp, options.mode ?? 0o644, (error) => (error ? reject(error) : resolve())));
      await this.rename(temp, path);
    } catch (error) {
      // A full disk must not leave a partial temp file behind.
      await new Promise<void>((resolve) => sftp.unlink(temp, () => resolve()));
      throw error;
    }
  }

  async rename(from: string, to: string): Promise<void> {
    // SFTP v3 rename refuses an existing target; OpenSSH's posix-rename replaces it atomically.
    await this.withSftp(
      `renaming ${from}`,
      (sftp) =>
        new Promise<void>((resolve, reject) =>
          sftp.ext_openssh_rename(from, to, (error) => (error ? reject(fileError(this.config.name, "rename", from, error)) : resolve())),
        ),
    );
  }

  async mkdir(path: string): Promise<void> {
    await this.runScript('mkdir -p -- "$1"', [path], "NodeCommandFailed", `create ${path}`);
  }

  async remove(path: string): Promise<void> {
    await this.runScript('rm -rf -- "$1"', [path], "NodeCommandFailed", `remove ${path}`);
  }

  async symlink(target: string, path: string): Promise<void> {
    await this.runScript('ln -sfn -- "$1" "$2"', [target, path], "NodeCommandFailed", `link ${path}`);
  }

  async readlink(path: string): Promise<string | undefined> {
    return this.withSftp(`reading the link ${path}`, (sftp) => new Promise((resolve) => sftp.readlink(path, (error, target) => resolve(error ? undefined : target))));
  }

  async putFile(localPath: string, remotePath: string, options: PutOptions = {}): Promise<void> {
    // The local file a push reads is no longer read once the connection drops under it.
    let stopReading: (() => void) | undefined;
    const push = (session?: SFTPWrapper): Promise<void> =>
      this.withSftp(
        `pushing ${remotePath}`,
        (sftp) => this.putFileOver(sftp, localPath, remotePath, options, (stop) => (stopReading = stop)),
        () => stopReading?.(),
        session,
      );
    const signal = options.signal;
    if (signal === undefined) return push();
    // A push that may be stopped runs on a session of its own, ended when it is: the writes in
    // flight are dropped with it and the caller hears at once; what reached the node stays.
    if (signal.aborted) throw abortError(signal);
    await this.connection.withOwnSftp(async (session) => {
      let stop: (() => void) | undefined;
      const stopped = new Promise<never>((_, reject) => {
        stop = () => {
          stopReading?.();
          session.end();
          reject(abortError(signal));
        };
        listenForAbort(signal, stop);
      });
      const work = push(session);
      work.catch(() => undefined);
      try {
        await Promise.race([work, stopped]);
      } finally {
        signal.removeEventListener("abort", stop!);
      }
    });
  }

  private async putFileOver(sftp: SFTPWrapper, localPath: string, remotePath: string, options: PutOptions, opened: (stop: () => void) => void): Promise<void> {
    const offset = options.startOffset ?? 0;
    // A partial file an earlier push left behind may have holes below its size: a write that failed
    // (a full disk) while later ones in flight succeeded (space freed meanwhile), or writes lost with
    // the connection. At most `maxWritesInFlight` writes are in flight, and none starts after a
    // failure, so every hole lies within one such window below the size. Two windows are written
    // again, in place (a margin that costs 4 MiB at most); the checksum after the transfer is the
    // final word anyway.
    const from = offset === 0 ? 0 : Math.max(0, offset - 2 * maxWritesInFlight * writeBytes);
    await putWindowed(sftp, localPath, remotePath, {
      from,
      flags: offset === 0 ? "w" : "r+",
      onOpen: opened,
      ...(options.readLocal === undefined ? {} : { readLocal: options.readLocal }),
      ...(options.closeLocal === undefined ? {} : { closeLocal: options.closeLocal }),
      // Progress counts from `startOffset`, as the caller asked; the rewritten window is not new bytes.
      onProgress: (bytes) => {
        if (from + bytes > offset) options.onProgress?.(from + bytes - offset);
      },
    }).catch((error: unknown) => {
      // The local side's own failure (a source whose file system hangs, from readLocal) stays its own.
      if (error instanceof ShardctlError) throw error;
      throw fileError(this.config.name, "push", remotePath, error as Error);
    });
  }

  async probePort(host: string, port: number, deadlineMs = 1_000): Promise<PortAnswer> {
    const started = performance.now();
    const client = await bounded(
      this.connection.get(),
      deadlineMs,
      () => new ShardctlError("NodeUnreachable", `node ${this.config.name}: no connection within ${deadlineMs} ms`),
    );
    if (!isUsable(client)) throw new ShardctlError("NodeUnreachable", `node ${this.config.name}: the connection closed`);
    const left = Math.max(1, deadlineMs - (performance.now() - started));
    // A direct-tcpip channel makes sshd itself connect from the node. sshd answers the channel open
    // only once its connect ended: "Connection refused" is the target's RST; a failure for any other
    // reason (the network's unreachable, say) reads as silence, as does no reply in time. A channel
    // that cannot even be asked for (the connection dropped meanwhile) is this node's own silence.
    let connectionLost = false;
    const answer = await askPort(() => {
      let channel: ClientChannel | undefined;
      let cancelled = false;
      const result = new Promise<PortAnswer>((resolve) => {
        try {
          client.forwardOut("127.0.0.1", 0, host, port, (error, ch) => {
            channel = ch;
            if (cancelled) ch?.destroy();
            if (!error) return resolve("open");
            if (/refused/i.test(error.message)) return resolve("refused");
            if (/not connected|no response|closed/i.test(error.message)) connectionLost = true;
            resolve("no-answer");
          });
        } catch {
          connectionLost = true;
          resolve("no-answer");
        }
      });
      void result.then(() => channel?.destroy());
      return {
        answer: result,
        cancel: () => {
          cancelled = true;
          channel?.destroy();
        },
      };
    }, left);
    if (connectionLost && answer === "no-answer")
      throw new ShardctlError("NodeUnreachable", `node ${this.config.name}: the connection dropped while probing ${joinHostPort(host, port)}`);
    return answer;
  }

  async isPortOpen(host: string, port: number, deadlineMs = 1_000): Promise<boolean> {
    // A direct-tcpip channel makes sshd itself connect from the node: no tool needed there.
    const client = await this.connection.get();
    return new Promise((resolve) => {
      let settled = false;
      const timer = setTimeout(() => finish(false), deadlineMs);
      function finish(ok: boolean, channel?: ClientChannel): void {
        channel?.destroy();
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        resolve(ok);
      }
      client.forwardOut("127.0.0.1", 0, host, port, (error, channel) => finish(!error, channel));
    });
  }

  async close(): Promise<void> {
    const lanes = this.watchLanes.splice(0);
    await Promise.all([this.connection.close(), ...lanes.map((l) => l.connection.close())]);
  }
}

function collect(
  channel: ClientChannel,
  argv: string[],
  started: number,
  /** `pidOnly`: keep no output past the shell's first line (its pid, which a stop needs). */
  options: RunOptions & { abort?: AbortSignal; pidOnly?: boolean },
  /** Told when the command shows it started (output, or its end), and when it is stopped without having shown it. */
  note: (started: boolean) => void,
  kill: (pid: number) => void,
): Promise<CommandResult> {
  return new Promise((resolve) => {
    let settled = false;
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    let exitCode: number | undefined;
    let signal: string | undefined;
    let timedOut = false;
    // Stopped before the shell printed its pid: killed as soon as the pid arrives.
    let killOnPid = false;
    // Closes the channel of a command whose pid never came (see stop).
    let abandon: NodeJS.Timeout | undefined;
    let began = false;
    const begin = (): void => {
      if (!began) note((began = true));
    };
    // Whether the pid's line is in: after it, a `pidOnly` command's output is dropped.
    let pidLine = false;
    channel.on("data", (d: Buffer) => {
      if (!(options.pidOnly === true && pidLine)) out.push(d);
      if (!pidLine && d.includes(10)) pidLine = splitPidLine(Buffer.concat(out).toString("utf8")) !== undefined;
      // A shell that prints without end before the command starts: its last words are enough.
      if (!pidLine && out.reduce((n, b) => n + b.length, 0) > maxPreambleBytes) {
        const kept = Buffer.concat(out);
        out.length = 0;
        out.push(kept.subarray(kept.length - maxPreambleBytes / 2));
      }
      begin();
      if (killOnPid) stop();
    });
    channel.stderr.on("data", (d: Buffer) => err.push(d));
    channel.on("exit", (code: number | null, sig?: string) => {
      begin();
      if (typeof code === "number") exitCode = code;
      else if (sig !== undefined) signal = sig.startsWith("SIG") ? sig : `SIG${sig}`;
    });
    const stop = (): void => {
      const pid = splitPidLine(Buffer.concat(out).toString("utf8"))?.pid;
      if (pid !== undefined) {
        killOnPid = false;
        kill(pid);
        channel.close();
        finish();
      } else if (!killOnPid) {
        if (timedOut) note(false);
        // No pid yet: the node's shell has not started the command (its start-up files still run:
        // a pyenv or conda init, a lock they wait for). The caller has its answer already; the
        // channel stays open for the pid (closing it would leave the command to run unseen), and
        // keeps its slot of the connection meanwhile, for `abandonAfterMs` at most: a node whose
        // commands do not start is asked no more than its slots allow, instead of one more session
        // piling up on it at every probe.
        killOnPid = true;
        abandon = setTimeout(() => channel.close(), abandonAfterMs);
        abandon.unref();
      }
    };
    const timer = Number.isFinite(options.deadlineMs) ? setDeadline(options.deadlineMs!, () => ((timedOut = true), stop())) : undefined;
    const onAbort = (): void => stop();
    const finish = (): void => {
      if (settled) return;
      settled = true;
      timer?.clear();
      clearTimeout(abandon);
      options.abort?.removeEventListener("abort", onAbort);
      const split = splitPidLine(Buffer.concat(out).toString("utf8"));
      resolve({
        argv,
        exitCode: timedOut ? undefined : exitCode,
        signal: timedOut ? (signal ?? "SIGKILL") : signal,
        stdout: split?.rest ?? "",
        ...(split !== undefined && split.preamble !== "" ? { preamble: split.preamble } : {}),
        stderr: Buffer.concat(err).toString("utf8"),
        timedOut,
        durationMs: Math.round(performance.now() - started),
      });
    };
    channel.on("close", finish);
    if (options.abort !== undefined) listenForAbort(options.abort, onAbort);
    if (options.abort?.aborted) stop();
    if (options.stdin !== undefined) channel.end(options.stdin);
    else channel.end();
  });
}

/**
 * What begins the line carrying the session's pid. The node's shell start-up files may print
 * before the command runs (a banner in ~/.bashrc or ~/.zshenv, which bash and zsh read for ssh
 * commands too): that text is not the command's output, and its first line is no pid.
 */
const pidMarker = "@shardctl-pid:";

/** Most of what a shell prints before the command that is kept, bytes (64 KiB). */
const maxPreambleBytes = 64 * 1024;

/**
 * The pid of the marker's line, the command's output after it and the shell's before it (the
 * newline printed before the marker left out); undefined until that line is whole.
 */
function splitPidLine(text: string): { pid: number; rest: string; preamble: string } | undefined {
  const before = text.indexOf(`\n${pidMarker}`);
  if (before < 0) return undefined;
  const at = before + 1;
  const newline = text.indexOf("\n", at);
  if (newline < 0) return undefined;
  const pid = Number(text.slice(at + pidMarker.length, newline));
  return Number.isInteger(pid) && pid > 0 ? { pid, rest: text.slice(newline + 1), preamble: text.slice(0, before) } : undefined;
}

/** `work`, or an empty result as soon as `signal` aborts. */
function untilCommandAborted(work: Promise<CommandResult>, signal: AbortSignal, argv: string[], started: number): Promise<CommandResult> {
  work.catch(() => undefined);
  return untilAborted(work, signal, () => ({
    argv,
    exitCode: undefined,
    signal: "SIGKILL",
    stdout: "",
    stderr: "",
    timedOut: false,
    durationMs: Math.round(performance.now() - started),
  }));
}

/** `work`, or `failure()` once `ms` passed first. */
async function bounded<T>(work: Promise<T>, ms: number, failure: () => Error): Promise<T> {
  let deadline: Deadline | undefined;
  work.catch(() => undefined);
  try {
    return await Promise.race([work, new Promise<never>((_, reject) => (deadline = setDeadline(ms, () => reject(failure()))))]);
  } finally {
    deadline?.clear();
  }
}

/** ssh2 keeps a closed client object around; asking it for a channel then throws or hangs. */
function isUsable(client: Client): boolean {
  const socket = (client as unknown as { _sock?: { writable?: boolean } })._sock;
  return socket?.writable !== false;
}

function fileError(node: string, verb: string, path: string, error: Error): ShardctlError {
  return new ShardctlError("NodeFileError", `node ${node}: cannot ${verb} ${path}: ${error.message}`, { cause: error });
}

/**
 * The SSH library's word for a session request the server never confirmed, in an operator's: a
 * connection that dies as a command is asked (a cut network, a node going down) fails its request
 * with a bare "Unable to exec", which reads like a missing program.
 */
function inWords(message: string): string {
  // "No response from server": the connection closed while a channel or request waited on it.
  if (message === "Unable to exec" || message === "Channel is not open" || message === "No response from server") {
    return `the SSH session did not start the command (${message}): the connection to the node failed as it was asked (the network to it cut, or the node going down)`;
  }
  return message;
}
