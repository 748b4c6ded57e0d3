/**
 * Spawns the built CLI's `shardctl router --config <file>` and waits for its "router listening" log
 * line, which carries the URL (the config may ask for port 0). Needs `npm run build` first.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";

export const CLI = fileURLToPath(new URL("../../../dist/src/cli/shardctl.js", import.meta.url));

export type RouterProcess = { url: string; child: ChildProcess; logs: () => Array<Record<string, unknown>>; stop: () => Promise<number | null> };

/** `openFiles`: the router's descriptor limit (`ulimit -n`), when a test needs a small one. */
export async function spawnRouter(configFile: string, extraArgs: string[] = [], deadlineMs = 10_000, openFiles?: number): Promise<RouterProcess> {
  if (!existsSync(CLI)) throw new Error(`${CLI} is missing: run \`npm run build\` first`);
  const argv = [process.execPath, CLI, "router", "--config", configFile, ...extraArgs];
  const child =
    openFiles === undefined
      ? spawn(argv[0]!, argv.slice(1), { stdio: ["ignore", "pipe", "pipe"] })
      : spawn("bash", ["-c", `ulimit -n ${openFiles} && exec "$@"`, "bash", ...argv], { stdio: ["ignore", "pipe", "pipe"] });
  const lines: Array<Record<string, unknown>> = [];
  let buffered = "";
  let stderr = "";
  const url = await new Promise<string>((resolve, reject) => {
    // A router that never listens (blocked on its config, say) is killed, not left behind.
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`router did not log "router listening" within ${deadlineMs} ms:\n${stderr}`));
    }, deadlineMs);
    child.stderr.on("data", (chunk: Buffer) => {
      stderr += chunk.toString();
      buffered += chunk.toString();
      const parts = buffered.split("\n");
      buffered = parts.pop() ?? "";
      for (const part of parts) {
        let line: Record<string, unknown>;
        try {
          line = JSON.parse(part) as Record<string, unknown>;
        } catch {
          continue;
        }
        lines.push(line);
        if (line.msg === "router listening" && typeof line.url === "string") {
          clearTimeout(timer);
          resolve(line.url);
        }
      }
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`router exited with ${code} before listening:\n${stderr}`));
    });
  });
  const stop = async (): Promise<number | null> => {
    // Ended already (by a signal too: its exitCode stays null then), its exit event said.
    if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
    const exited = new Promise<number | null>((done) => child.once("exit", (code) => done(code)));
    child.kill("SIGTERM");
    return exited;
  };
  return { url, child, logs: () => lines, stop };
}
