/** The shapes every node implementation shares: node config, command results, file stats, probes. */
import type { ChunkRead } from "../files/index.js";

/** A node as the settings file declares it (structurally the same as src/spec's NodeEntry). */
export interface NodeConfig {
  name: string;
  /** "local", an address, or an alias from the ssh config file. */
  host: string;
  /** True for the control machine itself; default: host === "local". */
  local?: boolean;
  user?: string;
  /** SSH port. Default 22 (an ssh config alias may override it when the node does not set one). */
  port?: number;
  identityFile?: string;
  /** "strict" refuses unknown keys; "accept-new" records them. Changed keys are always refused. */
  hostKeyPolicy?: "strict" | "accept-new";
  /** Where models are staged on the node (an HF cache root). */
  modelDir: string;
  /** Declared total memory, bytes. */
  memory?: number;
  /** Cap on the memory a stage may use, bytes. */
  memoryLimit?: number;
  accelerator?: "apple-silicon" | "cuda" | "cpu";
  engineVersion?: string;
}

/** One result shape for every command, identical on success and failure (execa's). */
export interface CommandResult {
  argv: string[];
  /** Undefined when the command was killed by a signal or never finished. */
  exitCode: number | undefined;
  signal: string | undefined;
  stdout: string;
  stderr: string;
  timedOut: boolean;
  durationMs: number;
  /**
   * Set when the deadline ran out while no connection to the node was up: why none could be made,
   * from the last failed attempt ("connect ECONNREFUSED …" for a stopped sshd, a handshake timeout
   * for a silent node), or "still connecting" while the first attempt is under way.
   */
  unreached?: string;
  /**
   * Set on a command that timed out while the node itself answered all along (this machine, or an
   * SSH connection up past the keepalive bound, which drops one to a silent node): the command
   * hung there, not the way to the node — a file system it touches (a frozen network mount, a
   * failing disk), or a node too loaded to run it.
   */
  nodeAnswered?: true;
  /**
   * What the node's shell printed before the command ran (its start-up files: a banner in ~/.bashrc
   * or ~/.zshenv), when it printed anything; not part of `stdout`.
   */
  preamble?: string;
}

export interface RunOptions {
  /** Kill the command after this many ms. Default 30000. */
  deadlineMs?: number;
  stdin?: string | Buffer;
  cwd?: string;
  /** Kills the command (and its children) when aborted; the result is as for a kill. */
  signal?: AbortSignal;
}

export interface DetachedOptions {
  /** File on the node receiving stdout and stderr (appended). */
  logFile: string;
  cwd?: string;
  env?: Record<string, string>;
  /** When set, a wrapper shell writes the command's exit status (0-255, 128+n for signal n) here. */
  exitStatusFile?: string;
}

export interface DetachedProcess {
  pid: number;
  /** Kernel start time: "linux:<clock ticks since boot>" or the `ps -o lstart=` text elsewhere. */
  startTime: string;
}

export interface FileStat {
  size: number;
  /** Modification time, seconds since the epoch (fractional where the node reports nanoseconds). */
  mtimeSec: number;
  /** Status change time, seconds (cannot be set back by `touch`, so a rewrite always shows). */
  ctimeSec: number;
  ino: number;
  type: "file" | "directory" | "other";
}

export interface PutOptions {
  onProgress?: (bytes: number) => void;
  /** Default 0 (replace the remote file). */
  startOffset?: number;
  /**
   * Stops the copy when aborted, keeping what was written (over SSH the push runs on an SFTP session
   * of its own, ended then), and rejects with an AbortError at once.
   */
  signal?: AbortSignal;
  /**
   * How the local file's bytes are read: fs.read's callback form. Default fs.read itself; staging
   * gives one that takes turns with the model directory's other reads and fails on a hung file system.
   */
  readLocal?: ChunkRead;
  /** How the local file is closed once the copy ends. Default at once; staging puts it off while its file system hangs. */
  closeLocal?: (close: () => Promise<void>) => void;
}

/**
 * What a TCP connection attempt from a node got: "open" (connected), "refused" (the host answered
 * RST: it is reachable and nothing listens), or "no-answer" (no reply within the deadline, or the
 * network said the host is unreachable: a partition looks like this, a stopped process does not).
 */
export type PortAnswer = "open" | "refused" | "no-answer";

/** A deadline for one question to a node, ms. */
export interface AskOptions {
  /** Give up after this many ms (the connection and channel set-up included). Default 30000. */
  deadlineMs?: number;
}

export interface NodeAccess {
  readonly config: NodeConfig;
  readonly kind: "local" | "ssh";
  /**
   * Whether a connection to the node is up now: false for an SSH node whose connection dropped and
   * is not made again yet (a refused or silent node); undefined where there is none to lose.
   */
  readonly connected?: boolean;
  run(argv: string[], options?: RunOptions): Promise<CommandResult>;
  startDetached(argv: string[], options: DetachedOptions): Promise<DetachedProcess>;
  /** Undefined when no such process exists. */
  processStartTime(pid: number, options?: AskOptions): Promise<string | undefined>;
  /**
   * Signal the process group of `pid` (detached processes lead their own group) only when the
   * process's start time equals `expectedStartTime`; false (nothing signalled) otherwise.
   */
  signal(pid: number, signal: NodeJS.Signals, expectedStartTime: string, options?: AskOptions): Promise<boolean>;
  /** Resolves once the process is gone (or the pid now belongs to another process). */
  watchExit(pid: number, startTime: string, options?: { signal?: AbortSignal }): Promise<void>;
  readFile(path: string): Promise<Buffer>;
  /** Atomic: written to a temp name beside `path`, then renamed. Mode default 0o644. */
  writeFile(path: string, data: string | Buffer, options?: { mode?: number }): Promise<void>;
  rename(from: string, to: string): Promise<void>;
  /** Follows symlinks; undefined when missing. */
  stat(path: string): Promise<FileStat | undefined>;
  /** stat for many paths in one round trip; `signal` stops it (a pass overtaken by a change). */
  statMany(paths: string[], options?: { signal?: AbortSignal }): Promise<Array<FileStat | undefined>>;
  mkdir(path: string): Promise<void>;
  /** Recursive, no error when missing. */
  remove(path: string): Promise<void>;
  symlink(target: string, path: string): Promise<void>;
  readlink(path: string): Promise<string | undefined>;
  /**
   * Stream a local file to the node (written to `remotePath`, not atomically). With `startOffset`, the
   * existing remote file is completed from that offset (resume; a node whose writes run in parallel
   * writes a window below it again, in place). `onProgress` gets the bytes past `startOffset` sent so far.
   */
  putFile(localPath: string, remotePath: string, options?: PutOptions): Promise<void>;
  /**
   * sha256 (hex) of a file on the node. An aborted `signal` stops the hashing (a file of tens of
   * gigabytes takes minutes) and rejects with an AbortError.
   */
  sha256(path: string, options?: { signal?: AbortSignal }): Promise<string>;
  /** True when a TCP connection from this node to host:port succeeds within the deadline. */
  isPortOpen(host: string, port: number, deadlineMs?: number): Promise<boolean>;
  /**
   * Ask whether host:port accepts TCP connections from this node, telling a refusal from silence.
   * Throws NodeUnreachable when the node itself could not be asked within the deadline (default 1000 ms).
   */
  probePort(host: string, port: number, deadlineMs?: number): Promise<PortAnswer>;
  close(): Promise<void>;
}
