/** The control node itself: commands through node:child_process, files through node:fs, ports through node:net. */
import { createHash, randomBytes } from "node:crypto";
import { close, createReadStream, createWriteStream, existsSync, open, read } from "node:fs";
import { readFile, readlink, rename, rm, symlink, writeFile } from "node:fs/promises";
import { connect } from "node:net";
import { dirname, basename, join } from "node:path";
import { pipeline } from "node:stream/promises";
import { makeFolders, pathExists } from "../files/index.js";
import { listenForAbort } from "./abort-error.js";
import { setDeadline, type Deadline } from "./deadline.js";
import { askPort } from "./port-answer.js";
import { runProcess } from "./run-process.js";
import { ShellNode } from "./shell-node.js";
import type { AskOptions, CommandResult, NodeAccess, NodeConfig, PortAnswer, PutOptions, RunOptions } from "./types.js";

/** Whether this machine's processes can be read in /proc (Linux), looked at once. */
const procReadable = existsSync("/proc/self/stat");

/** Default per-command deadline, ms. */
export const defaultDeadlineMs = 30_000;

export class LocalNode extends ShellNode implements NodeAccess {
  readonly kind = "local" as const;
  constructor(readonly config: NodeConfig) {
    super();
  }

  /**
   * Read from /proc here, as the shell's st() reads it on a node (field 22 of /proc/<pid>/stat,
   * clock ticks since boot; a zombie counts as gone), without starting a shell: the health monitor
   * asks it of every local process each second, and each shell forked from this process, whose
   * address space is large, cost more than the question. Without /proc (macOS) the shell asks.
   */
  override async processStartTime(pid: number, options: AskOptions = {}): Promise<string | undefined> {
    if (!procReadable) return super.processStartTime(pid, options);
    let text: string;
    try {
      text = await readFile(`/proc/${pid}/stat`, "latin1");
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === "ENOENT" || code === "ESRCH") return undefined;
      return super.processStartTime(pid, options);
    }
    // The command name (field 2) is in parentheses and may hold ") ": the fields after it follow the last.
    const fields = text.slice(text.lastIndexOf(") ") + 2).split(" ");
    const state = fields[0];
    const ticks = fields[19];
    if (state === undefined || ticks === undefined || !/^\d+$/.test(ticks)) return super.processStartTime(pid, options);
    return state === "Z" ? undefined : `linux:${ticks}`;
  }

  async run(argv: string[], options: RunOptions = {}): Promise<CommandResult> {
    return this.exec(argv, { timeout: options.deadlineMs ?? defaultDeadlineMs, input: options.stdin, cwd: options.cwd, abort: options.signal });
  }

  protected runWatch(argv: string[], signal: AbortSignal | undefined): Promise<CommandResult> {
    // Grouped, so the abort ends what the watch's shell started too (its wait and keep-alive hold
    // its output open: the watch would otherwise end only with the process it watches).
    // Its output (a keep-alive byte a second) is not kept: it lives as long as the process it watches.
    return this.exec(argv, { group: true, discardStdout: true, ...(signal === undefined ? {} : { abort: signal }) });
  }

  private async exec(
    argv: string[],
    extra: { timeout?: number; group?: boolean; discardStdout?: boolean; input?: string | Buffer; cwd?: string; abort?: AbortSignal | undefined },
  ): Promise<CommandResult> {
    const [file, ...args] = argv;
    if (file === undefined) throw new TypeError("run needs a command");
    // A command with a deadline runs in a process group of its own, and the deadline ends the whole
    // group: a shell's children (a probe's `engine --version` that never answers) must not outlive it.
    const grouped = extra.timeout !== undefined || extra.group === true;
    let pid: number | undefined;
    let timedOut = false;
    let timer: Deadline | undefined;
    // An abort ends the whole group too (a download's curl under its shell).
    const onAbort = (): void => {
      if (pid !== undefined) killGroup(pid);
    };
    const r = await runProcess(file, args, {
      detached: grouped,
      ...(extra.discardStdout === true ? { discardStdout: true } : {}),
      ...(extra.cwd === undefined ? {} : { cwd: extra.cwd }),
      ...(extra.input === undefined ? {} : { input: extra.input }),
      onStart: (started) => {
        pid = started;
        if (!grouped) return;
        runningGroups.add(started);
        if (extra.timeout !== undefined)
          timer = setDeadline(extra.timeout, () => {
            timedOut = true;
            killGroup(started);
          });
        if (extra.abort !== undefined) listenForAbort(extra.abort, onAbort);
        if (extra.abort?.aborted === true) onAbort();
      },
    }).finally(() => {
      timer?.clear();
      extra.abort?.removeEventListener("abort", onAbort);
      if (pid !== undefined) runningGroups.delete(pid);
    });
    // A program that cannot be started answers as a shell would (and as it does on an SSH node,
    // whose commands run through one): 127 "not found", 126 not executable; any other spawn error
    // (no descriptor or process left) in its own words, with no exit status.
    // (A working directory that does not exist fails the spawn with ENOENT too: that is not the program's.)
    const cwdMissing = extra.cwd !== undefined && !(await pathExists(extra.cwd));
    const unstarted = r.spawnError === undefined ? undefined : cwdMissing ? undefined : shellAnswerOf(r.spawnError);
    const spawnWords = r.spawnError !== undefined && unstarted === undefined ? `${file}: cannot start: ${r.spawnMessage ?? r.spawnError}\n` : "";
    return {
      argv,
      exitCode: timedOut ? undefined : (unstarted?.exitCode ?? r.exitCode),
      signal: r.signal,
      stdout: r.stdout,
      stderr: unstarted === undefined ? `${spawnWords}${r.stderr}` : `${file}: ${unstarted.message}\n`,
      timedOut,
      ...(timedOut ? { nodeAnswered: true as const } : {}),
      durationMs: Math.round(r.durationMs),
    };
  }

  readFile(path: string): Promise<Buffer> {
    return readFile(path);
  }

  async writeFile(path: string, data: string | Buffer, options: { mode?: number } = {}): Promise<void> {
    const temp = join(dirname(path), `.${basename(path)}.${process.pid}.${randomBytes(6).toString("hex")}.tmp`);
    try {
      await writeFile(temp, data, { mode: options.mode ?? 0o644 });
      await rename(temp, path);
    } catch (error) {
      // A full disk must not leave a partial temp file behind.
      await rm(temp, { force: true }).catch(() => undefined);
      throw error;
    }
  }

  rename(from: string, to: string): Promise<void> {
    return rename(from, to);
  }

  async mkdir(path: string): Promise<void> {
    await makeFolders(path);
  }

  remove(path: string): Promise<void> {
    return rm(path, { recursive: true, force: true });
  }

  async symlink(target: string, path: string): Promise<void> {
    await rm(path, { force: true });
    await symlink(target, path);
  }

  readlink(path: string): Promise<string | undefined> {
    return readlink(path).catch(() => undefined);
  }

  async putFile(localPath: string, remotePath: string, options: PutOptions = {}): Promise<void> {
    const offset = options.startOffset ?? 0;
    const { readLocal, closeLocal } = options;
    // The stream reads and closes through what the caller gave (staging: in turn with the model directory's other reads).
    const files =
      readLocal === undefined && closeLocal === undefined
        ? {}
        : {
            fs: {
              open,
              read: readLocal ?? read,
              close: (fd: number, done: (error: Error | null) => void) => {
                if (closeLocal === undefined) return close(fd, done);
                closeLocal(() => new Promise<void>((resolve) => close(fd, () => resolve())));
                done(null);
              },
            },
          };
    const source = createReadStream(localPath, { highWaterMark: 1 << 20, start: offset, ...files });
    let done = 0;
    source.on("data", (chunk) => {
      done += chunk.length;
      options.onProgress?.(done);
    });
    await pipeline(source, createWriteStream(remotePath, { flags: offset > 0 ? "a" : "w" }), ...(options.signal === undefined ? [] : [{ signal: options.signal }]));
  }

  // In-process hashing: no child process, same throughput as sha256sum (OpenSSL underneath).
  override async sha256(path: string, options: { signal?: AbortSignal } = {}): Promise<string> {
    const hash = createHash("sha256");
    const stream = createReadStream(path, { highWaterMark: 4 << 20, ...(options.signal === undefined ? {} : { signal: options.signal }) });
    for await (const chunk of stream) hash.update(chunk as Buffer);
    return hash.digest("hex");
  }

  isPortOpen(host: string, port: number, deadlineMs = 1_000): Promise<boolean> {
    return new Promise((resolve) => {
      const socket = connect({ host, port });
      const timer = setTimeout(() => finish(false), deadlineMs);
      function finish(ok: boolean): void {
        clearTimeout(timer);
        socket.destroy();
        resolve(ok);
      }
      socket.once("connect", () => finish(true));
      socket.once("error", () => finish(false));
    });
  }

  probePort(host: string, port: number, deadlineMs = 1_000): Promise<PortAnswer> {
    return askPort(() => {
      const socket = connect({ host, port });
      const answer = new Promise<PortAnswer>((resolve) => {
        socket.once("connect", () => resolve("open"));
        // ECONNREFUSED is the host's own RST; EHOSTUNREACH, ENETUNREACH and the like are silence.
        socket.once("error", (error: NodeJS.ErrnoException) => resolve(error.code === "ECONNREFUSED" ? "refused" : "no-answer"));
      });
      void answer.then(() => socket.destroy());
      return { answer, cancel: () => socket.destroy() };
    }, deadlineMs);
  }

  async close(): Promise<void> {}
}

/**
 * Process groups of commands still running. A detached group is not ended with this process the
 * way other subprocesses are, so it is ended here when this process exits.
 */
const runningGroups = new Set<number>();
process.on("exit", () => {
  for (const pid of runningGroups) killGroup(pid);
});

/** SIGKILL to every process of the group `pid` leads (already gone: nothing to do). */
function killGroup(pid: number): void {
  try {
    process.kill(-pid, "SIGKILL");
  } catch {
    // The group ended on its own.
  }
}

/** The exit code and words of a shell that could not start a program, for the spawn error `code`. */
function shellAnswerOf(code: string | undefined): { exitCode: number; message: string } | undefined {
  if (code === "ENOENT") return { exitCode: 127, message: "not found" };
  if (code === "EACCES") return { exitCode: 126, message: "Permission denied" };
  return undefined;
}
