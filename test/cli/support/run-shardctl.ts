/** Run a built program of this repository (dist/, so `npm run build` first) as a real process. */
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

export const repoRoot = fileURLToPath(new URL("../../../", import.meta.url));
export const shardctlBin = join(repoRoot, "dist/src/cli/shardctl.js");

export interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** Throws with the fix when the build is missing (tests spawn the built CLI, never the sources). */
export function requireBuild(): void {
  if (!existsSync(shardctlBin)) throw new Error(`${shardctlBin} is missing: run \`npm run build\` first`);
}

/** `file args…`, its exit code and output; never rejects on a non-zero exit. */
export function runFile(file: string, args: readonly string[], options: { cwd?: string; env?: NodeJS.ProcessEnv; timeoutMs?: number } = {}): Promise<Run> {
  return new Promise((resolve, reject) => {
    execFile(
      file,
      args,
      { cwd: options.cwd ?? repoRoot, env: options.env ?? process.env, timeout: options.timeoutMs ?? 20_000, maxBuffer: 16 << 20 },
      (error, stdout, stderr) => {
        if (error !== null && typeof error.code !== "number") {
          reject(new Error(`${file} ${args.join(" ")}: ${error.message}\n${stderr}`));
          return;
        }
        resolve({ code: error === null ? 0 : (error.code as number), stdout, stderr });
      },
    );
  });
}

/** `shardctl args…` from dist, in `cwd` (default: the repository). */
export function shardctl(args: readonly string[], options: { cwd?: string; env?: NodeJS.ProcessEnv } = {}): Promise<Run> {
  return runFile(process.execPath, [shardctlBin, ...args], options);
}
