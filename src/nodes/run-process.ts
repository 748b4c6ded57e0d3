/**
 * One local command to its end: its exit, its output, how long it took. A program that cannot be
 * started (not found, not executable, or no descriptor or process left: EMFILE, EAGAIN) is an
 * answer with a spawn error code, never an exception and never an unhandled 'error' event. (execa
 * threw a TypeError when the spawn failed at once, and the child's 'error' event, which nothing
 * listened to yet, then ended the daemon: a flood of connections that used up its descriptors took
 * supervision down with it.)
 */
import { spawn } from "node:child_process";
import { listenForAbort } from "./abort-error.js";

export interface ProcessOptions {
  /** Written to the command's stdin, which is then closed; stdin is /dev/null without it. */
  input?: string | Buffer;
  cwd?: string;
  /** Run in a process group of its own (its pid is the group's id). */
  detached?: boolean;
  /** Aborting sends SIGTERM to the command (not to its group). */
  cancelSignal?: AbortSignal;
  /** Called with the pid once the command started. */
  onStart?: (pid: number) => void;
  /**
   * Keep none of its stdout (the result's is empty): a command that runs for days and writes as it
   * goes (an exit watch's keep-alive, a byte a second) must not hold what it wrote.
   */
  discardStdout?: boolean;
}

export interface ProcessResult {
  /** Undefined when the command ended by a signal or never started. */
  exitCode: number | undefined;
  signal: NodeJS.Signals | undefined;
  stdout: string;
  stderr: string;
  /** The spawn's error code when the command never started (ENOENT, EACCES, EMFILE, …). */
  spawnError: string | undefined;
  /** The spawn error's message, when there was one. */
  spawnMessage: string | undefined;
  durationMs: number;
}

/** Output kept per stream, bytes: a command that writes more is stopped (as execa's default maxBuffer). */
const maxOutputBytes = 100 * 1024 * 1024;

export function runProcess(file: string, args: readonly string[], options: ProcessOptions = {}): Promise<ProcessResult> {
  const started = performance.now();
  return new Promise((resolve) => {
    let child: ReturnType<typeof spawn>;
    const settle = (result: Omit<ProcessResult, "durationMs">): void => resolve({ ...result, durationMs: performance.now() - started });
    try {
      child = spawn(file, args, {
        cwd: options.cwd,
        detached: options.detached === true,
        stdio: [options.input === undefined ? "ignore" : "pipe", "pipe", "pipe"],
      });
    } catch (error) {
      const e = error as NodeJS.ErrnoException;
      settle({ exitCode: undefined, signal: undefined, stdout: "", stderr: "", spawnError: e.code ?? "ERR_SPAWN", spawnMessage: e.message });
      return;
    }
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    let outBytes = 0;
    let errBytes = 0;
    let spawnError: NodeJS.ErrnoException | undefined;
    const onAbort = (): void => {
      child.kill("SIGTERM");
    };
    child.stdout?.on("data", (chunk: Buffer) => {
      if (options.discardStdout === true) return;
      outBytes += chunk.length;
      if (outBytes <= maxOutputBytes) out.push(chunk);
      else child.kill("SIGKILL");
    });
    child.stderr?.on("data", (chunk: Buffer) => {
      errBytes += chunk.length;
      if (errBytes <= maxOutputBytes) err.push(chunk);
      else child.kill("SIGKILL");
    });
    // A command that exits without reading all of its input closes the pipe under the write.
    child.stdin?.on("error", () => undefined);
    child.on("error", (error: NodeJS.ErrnoException) => {
      spawnError ??= error;
    });
    child.on("close", (code, signal) => {
      options.cancelSignal?.removeEventListener("abort", onAbort);
      settle({
        exitCode: spawnError !== undefined ? undefined : (code ?? undefined),
        signal: signal ?? undefined,
        stdout: Buffer.concat(out).toString("utf8"),
        stderr: Buffer.concat(err).toString("utf8"),
        spawnError: spawnError?.code,
        spawnMessage: spawnError?.message,
      });
    });
    if (child.pid !== undefined) options.onStart?.(child.pid);
    if (options.cancelSignal !== undefined) {
      if (options.cancelSignal.aborted) onAbort();
      else listenForAbort(options.cancelSignal, onAbort);
    }
    if (options.input !== undefined) child.stdin?.end(options.input);
  });
}
