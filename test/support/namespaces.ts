/**
 * Network namespaces made by tests (the fault lab's hosts, the browsers' own networks): the tools
 * they need, and their removal. A namespace (or link) is named `<prefix><creator pid, base 36>-…`,
 * so one left behind by a killed run is found and removed once its creator no longer runs. Needs
 * root. No vitest imports (the benches use it too).
 */
import { execFile } from "node:child_process";
import { existsSync, readdirSync, readlinkSync, statSync } from "node:fs";
import { promisify } from "node:util";
import { aptInstall } from "./apt.js";

const run = promisify(execFile);

/** Install Debian's `pkg` when `tool` is missing; throw naming the package when it still is. */
export async function ensureTool(tool: string, pkg: string): Promise<void> {
  if (existsSync(tool)) return;
  const failure = await aptInstall([pkg]).then(
    () => "",
    (error: unknown) => ` (installing it failed: ${error instanceof Error ? error.message : String(error)})`,
  );
  if (!existsSync(tool)) throw new Error(`${tool} is missing: install Debian's "${pkg}" package (apt-get install -y ${pkg})${failure}`);
}

/** Whether the process `pid` runs. */
export function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** The pid of the process that created `name` (`<prefix><pid36>-…`), or undefined when it is not such a name. */
export function creatorOf(name: string, prefix: string): number | undefined {
  const m = new RegExp(`^${prefix}([0-9a-z]+)-`).exec(name);
  return m === null ? undefined : parseInt(m[1]!, 36);
}

/** The processes inside namespace `ns`. */
export async function namespacePids(ns: string): Promise<number[]> {
  const { stdout } = await run("ip", ["netns", "pids", ns]).catch(() => ({ stdout: "" }));
  return stdout
    .split("\n")
    .filter((l) => /^\d+$/.test(l.trim()))
    .map(Number);
}

/**
 * Stop (SIGSTOP) every process inside namespace `ns` at once, without awaiting anything: the host
 * falls silent in the same turn of the event loop, before the caller's process sends or reads
 * anything more. Returns the pids stopped, for SIGCONT.
 */
export function stopNamespaceNow(ns: string): number[] {
  const mine = `net:[${statSync(`/run/netns/${ns}`).ino}]`;
  const stopped: number[] = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      if (readlinkSync(`/proc/${name}/ns/net`) !== mine) continue;
      process.kill(Number(name), "SIGSTOP");
      stopped.push(Number(name));
    } catch {
      // Gone meanwhile, or not ours to look at.
    }
  }
  return stopped;
}

/** Go on with processes `stopNamespaceNow` stopped. */
export function continueProcesses(pids: number[]): void {
  for (const pid of pids) {
    try {
      process.kill(pid, "SIGCONT");
    } catch {
      // Gone meanwhile.
    }
  }
}

/** Kill the processes inside namespace `ns` (which its creator started), then delete it. */
export async function killNamespace(ns: string): Promise<void> {
  for (const pid of await namespacePids(ns)) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      // Already gone.
    }
  }
  await run("ip", ["netns", "del", ns]).catch(() => undefined);
}

/** Remove the namespaces named with `prefix` whose creator no longer runs. */
export async function removeStaleNamespaces(prefix: string): Promise<void> {
  const { stdout } = await run("ip", ["netns", "list"]);
  for (const ns of stdout.split("\n").map((l) => l.split(" ")[0]!)) {
    const creator = creatorOf(ns, prefix);
    if (creator !== undefined && !isRunning(creator)) await killNamespace(ns);
  }
}
