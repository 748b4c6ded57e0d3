/**
 * What the fault tests count after a fault: engine processes (ps), ledger entries, the router's
 * backends (the embedded router's YAML), listening ports (ss), live processes, and the status
 * file's writes as they come. No vitest imports.
 */
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { open, readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import type { ClusterStatus } from "../../../src/reconciler/index.js";
import { enginesOf, sleep, type DaemonWorld } from "../../reconciler/daemon-fixture.js";

const run = promisify(execFile);

/** Pids of the world's engine processes (wrappers and engines), from ps. */
export async function enginePids(world: DaemonWorld): Promise<number[]> {
  return (await enginesOf(world)).map((l) => Number(l.split(/\s+/)[0])).sort((a, b) => a - b);
}

/** Cluster names with a ledger entry in the world's state dir. */
export async function ledgerNames(world: DaemonWorld): Promise<string[]> {
  const files = await readdir(join(world.stateDir, "ledger")).catch(() => [] as string[]);
  return files.filter((f) => f.endsWith(".json")).map((f) => f.slice(0, -".json".length));
}

/** The backends section of the router's YAML (what the embedded router serves). */
export async function routerBackends(world: DaemonWorld): Promise<string> {
  const text = await readFile(world.routerConfig, "utf8");
  return text.slice(text.indexOf("backends:"));
}

/** TCP sockets in LISTEN state in this machine's root namespace, as "address:port" (ss). */
export async function listeningSockets(): Promise<Array<{ address: string; port: number }>> {
  const { stdout } = await run("ss", ["-Htln"]);
  return stdout
    .split("\n")
    .map((l) => /^(.*):(\d+)$/.exec(l.trim().split(/\s+/)[3] ?? ""))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => ({ address: m[1]!.replace(/^\[|\]$/g, ""), port: Number(m[2]) }));
}

/** Poll `check` every `pollMs` (default 50) until it holds; the time it first held (ms since the epoch). */
export async function until(check: () => Promise<boolean>, timeoutMs: number, what: string, pollMs = 50): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check().catch(() => false)) return Date.now();
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await sleep(pollMs);
  }
}

/** SIGKILL the given pids, ignoring those already gone (a failed test's leftovers, by pid only). */
export function killPids(pids: readonly number[]): void {
  for (const pid of pids) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      // Already gone.
    }
  }
}

/** A live process (a zombie, dead but not yet reaped by its parent, does not count), from /proc/<pid>/stat. */
export function isRunning(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3) !== "Z";
  } catch {
    return false;
  }
}

/** One content of a status file, and when it was written. */
export interface StatusWrite {
  /** When the daemon wrote it (the file's modification time, ms since the epoch), not when it was read. */
  at: number;
  status: ClusterStatus;
}

/**
 * Every distinct content of `cluster`'s status file while `watching()`, read every `pollMs`, each
 * with when it was written; a content equal to `before` (the file's text) is not a write.
 */
export function recordStatusWrites(
  world: DaemonWorld,
  cluster: string,
  watching: () => boolean,
  options: { pollMs: number; before?: string },
): { writes: StatusWrite[]; done: Promise<void> } {
  const writes: StatusWrite[] = [];
  const file = join(world.clustersDir, `${cluster}.status.json`);
  const done = (async () => {
    let last = options.before ?? "";
    while (watching()) {
      // The time and the text from one open file: the daemon replaces the file by renaming, so both
      // are of the same write. A poll that runs late (a loaded machine) still dates a write right.
      const read = await readWrite(file);
      if (read !== undefined && read.text !== "" && read.text !== last) {
        last = read.text;
        writes.push({ at: read.at, status: JSON.parse(read.text) as ClusterStatus });
      }
      await sleep(options.pollMs);
    }
  })();
  return { writes, done };
}

/** A status file's text and modification time, from one open handle; undefined when it cannot be read. */
async function readWrite(file: string): Promise<{ text: string; at: number } | undefined> {
  const handle = await open(file, "r").catch(() => undefined);
  if (handle === undefined) return undefined;
  try {
    const [info, text] = await Promise.all([handle.stat(), handle.readFile("utf8")]);
    return { text, at: info.mtimeMs };
  } catch {
    return undefined;
  } finally {
    await handle.close();
  }
}

/** Every file under `dir` (paths relative to it), none when it cannot be read. */
export async function filesUnder(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true }).catch(() => []);
  return entries.filter((e) => !e.isDirectory()).map((e) => join(e.parentPath, e.name).slice(dir.length + 1));
}
