/**
 * What local and SSH nodes share: process control and stat built on `run` and the sh programs in
 * shell-scripts.ts, so both implementations take the very same path for pids and start times.
 */
import { ShardctlError, type NodeReason } from "../errors/index.js";
import { abortError } from "./abort-error.js";
import { exitStatusWrapper, sha256Script, signalScript, startDetachedScript, startTimeScript, statScript, watchExitScript } from "./shell-scripts.js";
import type { AskOptions, CommandResult, DetachedOptions, DetachedProcess, FileStat, NodeConfig, RunOptions } from "./types.js";

export abstract class ShellNode {
  abstract readonly config: NodeConfig;
  abstract run(argv: string[], options?: RunOptions): Promise<CommandResult>;

  /**
   * Run an sh program with positional arguments; throws a ShardctlError on a non-zero exit: with
   * `reason`, or NodeUnreachable when the node gave no answer (a silent node is not a failed command).
   */
  protected async runScript(script: string, args: string[], reason: NodeReason, what: string, options: RunOptions = {}): Promise<CommandResult> {
    const result = await this.run(["sh", "-c", script, "sh", ...args], options);
    // Killed because its signal aborted: the caller hears that, not a failed command.
    if (options.signal?.aborted === true) throw abortError(options.signal);
    if (result.exitCode !== 0) throw commandFailed(this.config.name, isUnanswered(result) ? "NodeUnreachable" : reason, what, result);
    return result;
  }

  async startDetached(argv: string[], options: DetachedOptions): Promise<DetachedProcess> {
    if (argv.length === 0) throw new TypeError("startDetached needs a command");
    for (const key of Object.keys(options.env ?? {})) {
      if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(key)) throw new TypeError(`invalid environment variable name "${key}"`);
    }
    let command = argv;
    if (options.exitStatusFile !== undefined) command = ["sh", "-c", exitStatusWrapper, options.exitStatusFile, ...command];
    const env = Object.entries(options.env ?? {}).map(([k, v]) => `${k}=${v}`);
    if (env.length > 0) command = ["env", ...env, ...command];
    // Without an answer (NodeUnreachable) the process may well have started, and only its pid was
    // lost: that is the node's silence, not a start that failed.
    const result = await this.runScript(startDetachedScript, [options.cwd ?? "/", options.logFile, ...command], "ProcessStartFailed", `start ${argv[0]}`);
    const line = result.stdout.trim();
    const space = line.indexOf(" ");
    const pid = Number(space < 0 ? line : line.slice(0, space));
    const startTime = space < 0 ? "" : line.slice(space + 1);
    if (!Number.isInteger(pid) || pid <= 0) throw new ShardctlError("ProcessStartFailed", `node ${this.config.name}: could not start ${argv[0]}: got "${line}"`);
    if (startTime === "") {
      throw new ShardctlError("ProcessStartFailed", `node ${this.config.name}: ${argv[0]} (pid ${pid}) exited immediately; see ${options.logFile}`);
    }
    return { pid, startTime };
  }

  async processStartTime(pid: number, options: AskOptions = {}): Promise<string | undefined> {
    const result = await this.runScript(startTimeScript, [String(pid)], "NodeCommandFailed", "read a process start time", options);
    const value = result.stdout.trim();
    return value === "" ? undefined : value;
  }

  async signal(pid: number, signal: NodeJS.Signals, expectedStartTime: string, options: AskOptions = {}): Promise<boolean> {
    const name = signal.replace(/^SIG/, "");
    const result = await this.run(["sh", "-c", signalScript, "sh", String(pid), expectedStartTime, name], options);
    if (result.exitCode === 3) return false;
    // No answer: whether the signal arrived cannot be told, and a caller must not take it as sent.
    if (result.timedOut) throw commandFailed(this.config.name, "NodeUnreachable", `signal pid ${pid}`, result);
    if (result.exitCode !== 0) {
      // The process may have exited between the check and kill: that is not a failure to signal.
      return false;
    }
    return true;
  }

  async watchExit(pid: number, startTime: string, options: { signal?: AbortSignal } = {}): Promise<void> {
    const result = await this.runWatch(["sh", "-c", watchExitScript, "sh", String(pid), startTime], options.signal);
    if (options.signal?.aborted) return;
    if (result.exitCode !== 0 && result.exitCode !== undefined) throw commandFailed(this.config.name, "NodeCommandFailed", `watch pid ${pid}`, result);
  }

  /** A command without a deadline, stopped by `signal` (watchers live as long as the process). */
  protected abstract runWatch(argv: string[], signal: AbortSignal | undefined): Promise<CommandResult>;

  async statMany(paths: string[], options: { signal?: AbortSignal } = {}): Promise<Array<FileStat | undefined>> {
    if (paths.length === 0) return [];
    const out: Array<FileStat | undefined> = [];
    // Keep command lines well under ARG_MAX.
    for (let i = 0; i < paths.length; i += 500) {
      const chunk = paths.slice(i, i + 500);
      const result = await this.runScript(statScript, chunk, "NodeCommandFailed", "stat files", options.signal === undefined ? {} : { signal: options.signal });
      const lines = result.stdout.split("\n").filter((l) => l !== "");
      for (const [j, line] of lines.entries()) {
        if (line.startsWith("! ")) {
          const why = line.slice(2);
          // A path longer than the node's file system takes is the configuration's, not the disk's: no retry mends it.
          if (/name too long/i.test(why)) {
            throw new ShardctlError(
              "NodeFileError",
              `node ${this.config.name}: ${why}, ${(chunk[j] ?? "").length} characters: the node's file system takes no path that long; set a shorter model_dir for node ${this.config.name} (the model's files go below it, some 150 characters deeper)`,
              { terminal: true },
            );
          }
          throw new ShardctlError(
            "NodeFileError",
            `node ${this.config.name}: cannot look at ${chunk[j] ?? "a file"}: ${why} (a failing disk, or a file system that refuses it, such as a network mount: the file is not taken for missing)`,
          );
        }
        out.push(parseStatLine(line));
      }
    }
    return out;
  }

  async stat(path: string): Promise<FileStat | undefined> {
    const [one] = await this.statMany([path]);
    return one;
  }

  async sha256(path: string, options: { signal?: AbortSignal } = {}): Promise<string> {
    const signal = options.signal;
    const result = await this.runScript(sha256Script, [path], "NodeCommandFailed", `hash ${path}`, {
      deadlineMs: 3_600_000,
      ...(signal === undefined ? {} : { signal }),
    });
    const hex = result.stdout.trim().split(/\s+/)[0] ?? "";
    if (!/^[0-9a-f]{64}$/.test(hex)) throw new ShardctlError("NodeCommandFailed", `node ${this.config.name}: unexpected sha256 output "${result.stdout.trim()}"`);
    return hex;
  }
}

function parseStatLine(line: string): FileStat | undefined {
  if (line === "-") return undefined;
  const [size, mtime, ctime, ino, ...type] = line.split(" ");
  const kind = type.join(" ").toLowerCase();
  return {
    size: Number(size),
    mtimeSec: Number(mtime),
    ctimeSec: Number(ctime),
    ino: Number(ino),
    type: kind.startsWith("regular") ? "file" : kind === "directory" ? "directory" : "other",
  };
}

/** No answer: the command's deadline passed, or its connection dropped before it said how it ended. */
function isUnanswered(result: CommandResult): boolean {
  return result.timedOut || (result.exitCode === undefined && result.signal === undefined);
}

export function commandFailed(node: string, reason: NodeReason, what: string, result: CommandResult): ShardctlError {
  const how = result.timedOut
    ? `timed out after ${result.durationMs} ms${
        result.unreached !== undefined
          ? `: no connection to the node (${result.unreached})`
          : result.nodeAnswered === true
            ? ", though the node answered all along: the command itself did not finish (a file system it touches may hang — a frozen network mount, a failing disk — or the node is too loaded to run it)"
            : ""
      }`
    : result.signal !== undefined
      ? `was killed by ${result.signal}`
      : result.exitCode === undefined
        ? `got no answer: it ended without saying how (its connection to the node dropped, or it could not be started)`
        : `exited with ${result.exitCode}`;
  const stderr = result.stderr.trim().split("\n").slice(-5).join("\n");
  return new ShardctlError(reason, `node ${node}: ${what} ${how}${stderr === "" ? "" : `: ${stderr}`}`);
}
