/**
 * The ledger: a durable record of what was started where (pid, process start time, ports, router
 * entry) for each cluster, one JSON file per cluster under `<state_dir>/ledger/`. It is a hint, not
 * the truth: a restarted daemon reads it to adopt what still runs or to finish tearing it down, and
 * every pid in it is checked against its start time before anything is signalled.
 *
 * Entries are written before the thing they describe is waited on, so a crash at any moment leaves
 * enough behind to clean up. No secrets are stored here: the transport token lives only in its
 * 0600 files on the nodes.
 */
import type { EngineKind } from "../engines/index.js";
import { lstat, mkdir, readdir, readFile, rm } from "node:fs/promises";
import { join, posix } from "node:path";
import { isShardctlError, ShardctlError } from "../errors/index.js";
import { untrustedOwner, writeFileAtomic } from "../files/index.js";

export type ProcessRole = "stage" | "coordinator";

export interface LedgerProcess {
  role: ProcessRole;
  /** Stage index; absent for the coordinator. */
  index?: number;
  /** Registry node name, or "local" for the control machine. */
  node: string;
  pid: number;
  /** The kernel's process start time, as the node reports it; guards against recycled pids. */
  startTime: string;
  /** The per-launch directory on that node (cluster TOML, token, log, exit code). */
  runDir: string;
  logFile: string;
  /** Written by the wrapper with the engine's exit status when it ends. */
  exitFile: string;
  /**
   * Set on a leftover the teardown that left it could not stop for want of an answer: its node was
   * silent, no longer registered, or a command there failed (not on one that survived SIGKILL on a
   * node that answered). The daemon watches that node and tears the entry down again the moment it
   * answers; a node that answered all along costs one extra pass.
   */
  unreachable?: boolean;
}

export interface LedgerPort {
  node: string;
  /** The address the port is bound on; ports are unique per address, not per registry node. */
  host: string;
  port: number;
  purpose: "transport" | "control" | "http";
}

export interface LedgerEntry {
  cluster: string;
  revision: string;
  /**
   * The definitions directory of the daemon that launched it. Daemons that share a state directory
   * but watch different directories never adopt, replace or prune each other's clusters.
   */
  owner?: string;
  /**
   * Hash of what the processes were started from (plan, model, engine, transport, coordinator,
   * nodes). A new revision with the same identity (e.g. a router weight edit) needs no restart.
   */
  identity?: string;
  /**
   * Hash of the definition alone (its revision without the registry entries of its nodes): a new
   * revision with the same digest changed only in the registry. Absent in entries from before it
   * was recorded.
   */
  definitionDigest?: string;
  /** The model id the processes serve (absent in entries from before it was recorded). */
  model?: string;
  /** The engine kind the processes run (entries from before it was recorded ran the default kind). */
  engine?: EngineKind;
  /** The definition's `[engine] generation_watchdog_seconds`, which health uses while it runs: see WatchedCluster. */
  generationWatchdogSeconds?: number;
  /** The definition's `[engine] health_silence_seconds`, which health uses while it runs: see WatchedCluster. */
  healthSilenceSeconds?: number;
  /** `launching` until every step succeeded, `running` after, `tearing-down` once teardown began. */
  phase: "launching" | "running" | "tearing-down";
  startedAt: string;
  processes: LedgerProcess[];
  ports: LedgerPort[];
  /** The coordinator's OpenAI-compatible base URL once known. */
  coordinatorUrl?: string;
  /** The router backend name once registered. */
  routerBackend?: string;
  /**
   * What its plan puts on each node (weights and KV caches), bytes by node name: a restarted daemon
   * counts it against the nodes' declared memory before its first pass adopts the cluster. Absent in
   * entries from before it was recorded.
   */
  memoryBytes?: Record<string, number>;
  /**
   * The commit of the model its processes were started from: the Hub commit a branch resolved to,
   * or for a pushed folder the hash of its files. Absent in entries from before it was recorded.
   */
  modelCommit?: string;
}

export class Ledger {
  readonly dir: string;
  // Writes of one cluster are chained so a later write never lands before an earlier one.
  private readonly pending = new Map<string, Promise<void>>();

  constructor(stateDir: string) {
    this.dir = join(stateDir, "ledger");
  }

  private file(cluster: string): string {
    return join(this.dir, `${cluster}.json`);
  }

  /**
   * The entry of a cluster, or undefined when nothing is recorded. A file that holds no entry
   * (damaged, edited by hand) is a terminal LedgerEntryUnreadable naming it: what runs for the
   * cluster is then unknown, so nothing may be launched or torn down on a guess.
   */
  async read(cluster: string): Promise<LedgerEntry | undefined> {
    await this.pending.get(cluster);
    const file = this.file(cluster);
    let text: string;
    try {
      text = await readFile(file, "utf8");
    } catch (error) {
      if (isNotFound(error)) return undefined;
      throw error;
    }
    const untrusted = await untrustedFile(file);
    if (untrusted !== undefined) throw unreadable(file, cluster, untrusted);
    let entry: unknown;
    try {
      entry = JSON.parse(text);
    } catch (error) {
      throw unreadable(file, cluster, `it is not JSON (${(error as Error).message})`);
    }
    if (!isEntry(entry, cluster)) throw unreadable(file, cluster, "it is not a ledger entry of this cluster");
    const wrong = entry.processes.map((p, i) => wrongProcess(p, i)).find((why) => why !== undefined);
    if (wrong !== undefined) throw unreadable(file, cluster, wrong);
    return entry;
  }

  /** Every recorded entry; unreadable ones are left out (each cluster's own read says why). */
  async list(): Promise<LedgerEntry[]> {
    let names: string[];
    try {
      names = await readdir(this.dir);
    } catch (error) {
      if (isNotFound(error)) return [];
      throw error;
    }
    const entries = await Promise.all(
      names
        .filter((n) => n.endsWith(".json"))
        .map((n) =>
          this.read(n.slice(0, -".json".length)).catch((error: unknown) => (isShardctlError(error, "LedgerEntryUnreadable") ? undefined : Promise.reject(error))),
        ),
    );
    return entries.filter((e): e is LedgerEntry => e !== undefined);
  }

  /**
   * Replace a cluster's entry atomically (temp file + rename). A write the disk refuses (full, over
   * quota, read-only, not permitted) is a transient StateDirUnwritable naming the file: the
   * surroundings' fault, which a launch is retried after without counting it against the restart budget.
   */
  write(entry: LedgerEntry): Promise<void> {
    const previous = this.pending.get(entry.cluster) ?? Promise.resolve();
    const file = this.file(entry.cluster);
    const next = previous.then(async () => {
      try {
        await mkdir(this.dir, { recursive: true });
        await writeFileAtomic(file, JSON.stringify(entry, null, 2) + "\n");
      } catch (error) {
        // A disk that takes no writes is named; anything else is what it is.
        if (!diskRefusals.has((error as NodeJS.ErrnoException).code ?? "")) throw error;
        throw new ShardctlError("StateDirUnwritable", `could not write ${file}: ${(error as Error).message}`, { cause: error });
      }
    });
    this.pending.set(
      entry.cluster,
      next.catch(() => undefined),
    );
    return next;
  }

  /** Forget a cluster once nothing of it runs any more. */
  async remove(cluster: string): Promise<void> {
    await this.pending.get(cluster);
    await rm(this.file(cluster), { force: true });
  }
}

/** The system's answers of a disk or folder that takes no writes. */
const diskRefusals = new Set(["ENOSPC", "EDQUOT", "EROFS", "EACCES", "EPERM"]);

function isNotFound(error: unknown): boolean {
  return (error as NodeJS.ErrnoException | undefined)?.code === "ENOENT";
}

/** The shape every reader of an entry relies on. */
function isEntry(value: unknown, cluster: string): value is LedgerEntry {
  if (typeof value !== "object" || value === null) return false;
  const e = value as Partial<LedgerEntry>;
  return (
    e.cluster === cluster &&
    typeof e.revision === "string" &&
    typeof e.startedAt === "string" &&
    (e.phase === "launching" || e.phase === "running" || e.phase === "tearing-down") &&
    Array.isArray(e.processes) &&
    Array.isArray(e.ports)
  );
}

/**
 * What is wrong with process `i` of an entry, or undefined. The daemon signals the
 * pids an entry names (each checked against its start time first), reads its log and exit files
 * into the status file, and removes its run folder: a process without a valid pid, a run folder
 * that is not an absolute path, or files outside it, are refused, not acted on. (A removal also
 * asks that the folder be a run folder of the cluster by its form: see isRunFolderOf.)
 */
function wrongProcess(p: unknown, i: number): string | undefined {
  if (typeof p !== "object" || p === null) return `process ${i} is not an object`;
  const { role, node, pid, startTime, runDir, logFile, exitFile } = p as Partial<LedgerProcess>;
  if (role !== "stage" && role !== "coordinator") return `process ${i} has no role`;
  if (typeof node !== "string" || node === "") return `process ${i} names no node`;
  if (typeof startTime !== "string") return `process ${i} has no start time`;
  // pid 0 with no start time: a process about to start (plannedProcess), found later by its files.
  const planned = pid === 0 && startTime === "";
  if (typeof pid !== "number" || !Number.isInteger(pid) || (pid <= 1 && !planned)) return `process ${i} has no valid pid`;
  if (typeof runDir !== "string" || !posix.isAbsolute(runDir) || posix.normalize(runDir) !== runDir)
    return `process ${i}'s runDir ${JSON.stringify(runDir)} is not an absolute, normal path`;
  for (const [key, path] of [
    ["logFile", logFile],
    ["exitFile", exitFile],
  ] as const) {
    if (typeof path !== "string" || posix.dirname(path) !== runDir || posix.normalize(path) !== path) return `process ${i}'s ${key} is not a file of its runDir`;
  }
  return undefined;
}

/**
 * Whether `dir` is, by its form, a run folder of `cluster` as every launch makes them:
 * `<model_dir>/.shardctl/run/<cluster>` on a node, `<stateDir>/run/<cluster>` on the control
 * machine. A folder is removed, recursively and as the daemon's user, only when it is one: an entry
 * written by someone else once named /tmp, and the prune emptied it.
 */
export function isRunFolderOf(dir: string, cluster: string, stateDir: string): boolean {
  if (!posix.isAbsolute(dir) || posix.normalize(dir) !== dir) return false;
  return dir.endsWith(`/.shardctl/run/${cluster}`) || dir === posix.join(stateDir, "run", cluster);
}

/**
 * Why a ledger file is not to be trusted, or undefined: one that is not a regular file (a link), or
 * belongs to another user than the daemon's or root — another user wrote it, and its pids and
 * folders are theirs to choose. One of the daemon's user writable by others loses that permission
 * (a daemon started with umask 000 made them so).
 */
async function untrustedFile(file: string): Promise<string | undefined> {
  const info = await lstat(file).catch(() => undefined);
  if (info === undefined) return undefined;
  if (!info.isFile()) return "it is not a regular file (a symbolic link?)";
  const untrusted = await untrustedOwner(file, info).catch(() => undefined);
  return untrusted === undefined ? undefined : `it ${untrusted}${untrusted.startsWith("belongs") ? ": another user wrote it" : ""}`;
}

function unreadable(file: string, cluster: string, why: string): ShardctlError {
  return new ShardctlError(
    "LedgerEntryUnreadable",
    `${file} cannot be read: ${why}. What runs for cluster "${cluster}" is unknown, so the daemon neither launches nor tears it down: ` +
      `check its nodes for its processes (shard-engine, mlxcel, mlx_lm) and stop any by hand, then delete the file and run \`shardctl reconcile ${cluster}\``,
    { terminal: true },
  );
}
