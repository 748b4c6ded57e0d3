/**
 * What a node offers: OS, architecture, accelerator family, engine version, memory and disk. Feeds
 * the planner's budgets and the homogeneity gate. Cached per reconcile pass (createProbeCache).
 */
import { clipText, isShardctlError } from "../errors/index.js";
import { probeScript } from "./shell-scripts.js";
import type { NodeAccess } from "./types.js";

export interface NodeProbe {
  name: string;
  reachable: boolean;
  /** Why the probe failed, when it did. */
  error?: string;
  /** The reason of an unreachable node's failure (`SshAuthFailed`, `HostKeyUnknown`, …), when it had one. */
  errorReason?: string;
  os?: string;
  arch?: string;
  accelerator?: "apple-silicon" | "cuda" | "cpu";
  /** First line of `<engine binary> --version`; undefined when no binary was given or it failed. */
  engineVersion?: string;
  /** The node's memory, or its memory cgroups' limit when that is less (a container's, a user slice's). */
  memoryTotalBytes?: number;
  /** Free memory: the node's, or what its memory cgroups leave (limit − usage + file cache) when that is less. */
  memoryAvailableBytes?: number;
  /** The least memory limit among the memory cgroups a command on the node runs in, when one caps the node's memory (Linux). */
  cgroupMemoryLimitBytes?: number;
  /** Free bytes on the file system holding model_dir (or its nearest existing ancestor). */
  diskFreeBytes?: number;
  probedAt: string;
}

export interface ProbeOptions {
  /** Engine binary whose `--version` is reported. Default none. */
  engineBinary?: string;
  /** Deadline for the whole probe, ms. Default 15000. */
  deadlineMs?: number;
  /** Ends the probe when aborted (the daemon stopping): its result says it was called off. */
  signal?: AbortSignal;
}

export async function probeNode(node: NodeAccess, options: ProbeOptions = {}): Promise<NodeProbe> {
  const probedAt = new Date().toISOString();
  const name = node.config.name;
  const deadlineMs = options.deadlineMs ?? 15_000;
  try {
    const result = await node.run(["sh", "-c", probeScript, "sh", node.config.modelDir, options.engineBinary ?? ""], {
      deadlineMs,
      ...(options.signal === undefined ? {} : { signal: options.signal }),
    });
    if (result.exitCode === undefined && !result.timedOut) return { name, reachable: true, error: `the probe was killed by ${result.signal ?? "a signal"}`, probedAt };
    if (result.exitCode !== undefined && result.exitCode !== 0)
      return { name, reachable: true, error: `probe exited with ${result.exitCode}: ${result.stderr.trim()}`, probedAt };
    const kv = new Map<string, string>();
    for (const line of result.stdout.split("\n")) {
      const eq = line.indexOf("=");
      if (eq > 0) kv.set(line.slice(0, eq), line.slice(eq + 1).trim());
    }
    // Cut short by the deadline: what the steps before the one under way found still holds (a hung
    // look at the model dir's disk takes nothing from the memory figures the plan budgets with).
    const stoppedAt = result.timedOut ? (kv.get("at") ?? "start") : undefined;
    if (stoppedAt === "start") return { name, reachable: true, error: `the probe got no answer within ${deadlineMs} ms`, probedAt };
    const num = (key: string, scale = 1): number | undefined => {
      const v = kv.get(key);
      return v === undefined || v === "" || !Number.isFinite(Number(v)) ? undefined : Number(v) * scale;
    };
    const diskFreeBytes = num("diskFreeKb", 1024);
    const os = kv.get("os");
    const arch = kv.get("arch");
    const accelerator = os === "Darwin" && arch === "arm64" ? "apple-silicon" : kv.has("cuda") ? "cuda" : "cpu";
    const error =
      stoppedAt !== undefined
        ? `the probe got no answer within ${deadlineMs} ms: ${stoppedAt === "disk" ? `the look at the free space of ${node.config.modelDir} did not return (a file system there that does not answer: a frozen network mount, a failing disk?)` : `\`${options.engineBinary ?? ""} --version\` did not return`}`
        : kv.has("engineError")
          ? engineFailure(options.engineBinary ?? "", kv.has("engineMissing"), clipVersion(kv.get("engineError") ?? ""))
          : undefined;
    return {
      name,
      reachable: true,
      os,
      arch,
      accelerator,
      ...versionOf(kv.get("engine")),
      ...(error === undefined ? {} : { error }),
      ...cappedMemory(num("memTotalKb", 1024) ?? num("memTotalBytes"), num("memAvailKb", 1024) ?? num("memAvailBytes"), result.stdout),
      ...(diskFreeBytes === undefined ? {} : { diskFreeBytes }),
      probedAt,
    };
  } catch (error) {
    return { name, reachable: false, error: (error as Error).message, ...(isShardctlError(error) ? { errorReason: error.reason } : {}), probedAt };
  }
}

/**
 * A limit this large is none: cgroup v1 writes "no limit" as the largest page-aligned 64-bit value
 * (9223372036854771712), and a limit past 2^60 bytes caps nothing real.
 */
const noCgroupLimit = 2 ** 60;

/**
 * The node's memory as a process started there may use it: /proc/meminfo tells the whole machine's,
 * while a container (LXC, Docker), a user slice with MemoryMax or any memory cgroup the SSH session
 * runs in lets its processes use no more than its limit, and the kernel's OOM killer ends the one
 * that passes it. Each "cgroupMem=<limit> <usage> <file cache>" line of the probe is one level up to
 * the root: the total is capped by the least limit, the free memory by the least room any level
 * leaves (its limit less what it uses, counting its file cache as free, which the kernel reclaims
 * before it kills: the staged model's pages are in it).
 */
function cappedMemory(
  totalBytes: number | undefined,
  availableBytes: number | undefined,
  stdout: string,
): Pick<NodeProbe, "memoryTotalBytes" | "memoryAvailableBytes" | "cgroupMemoryLimitBytes"> {
  let limit: number | undefined;
  let room: number | undefined;
  for (const line of stdout.split("\n")) {
    const [max, usage, cache] = (/^cgroupMem=(\d+) ?(\d*) ?(\d*)$/.exec(line.trim()) ?? []).slice(1).map((v) => (v === undefined || v === "" ? undefined : Number(v)));
    if (max === undefined || !(max < noCgroupLimit)) continue;
    limit = Math.min(limit ?? max, max);
    const left = usage === undefined ? max : Math.max(0, max - Math.max(0, usage - (cache ?? 0)));
    room = Math.min(room ?? left, left);
  }
  const least = (a: number | undefined, b: number | undefined): number | undefined => (a === undefined ? b : b === undefined ? a : Math.min(a, b));
  return {
    ...(least(totalBytes, limit) === undefined ? {} : { memoryTotalBytes: least(totalBytes, limit)! }),
    ...(least(availableBytes, room) === undefined ? {} : { memoryAvailableBytes: least(availableBytes, room)! }),
    ...(limit !== undefined && (totalBytes === undefined || limit < totalBytes) ? { cgroupMemoryLimitBytes: limit } : {}),
  };
}

/**
 * Why `<binary> --version` failed on a node, and what to do. The shell's own words ("sh: 14: x: not
 * found") name neither the node's PATH nor the setting: a command over SSH runs in a non-interactive
 * shell, whose PATH lacks what a login shell adds (Homebrew's /opt/homebrew/bin on a Mac).
 */
function engineFailure(binary: string, missing: boolean, output: string): string {
  const failed = `engine --version failed: ${output}`;
  if (!missing) return failed;
  const where = binary.includes("/") ? `there is no executable ${binary} on the node` : `${binary} is not on the PATH of a non-interactive shell on the node`;
  return `${failed} (${where}: give the engine's absolute path there, as --engine-binary and as [engine] binary)`;
}

/** Probe each node at most once per pass; make a new cache for every pass. */
export function createProbeCache(options: ProbeOptions = {}): (node: NodeAccess) => Promise<NodeProbe> {
  const cache = new Map<string, Promise<NodeProbe>>();
  return (node) => {
    let probe = cache.get(node.config.name);
    if (probe === undefined) {
      probe = probeNode(node, options);
      cache.set(node.config.name, probe);
    }
    return probe;
  };
}

/** The one-line capability badge `shardctl nodes` shows, e.g. "cpu linux/x86_64 engine 0.3.1". */
export function formatBadge(probe: NodeProbe): string {
  if (!probe.reachable) return "unreachable";
  const os = (probe.os ?? "?").toLowerCase();
  return `${probe.accelerator ?? "?"} ${os}/${probe.arch ?? "?"}${probe.engineVersion === undefined ? "" : ` ${probe.engineVersion}`}`;
}

/**
 * The longest engine version kept, characters (200): the first line of the engine's `--version`,
 * which the engine's author chose; it is compared across nodes and quoted in messages and tables.
 */
const maxVersionChars = 200;

/**
 * The bytes of a version line the node sends at most (its `cut -c 1-256`, which GNU cut counts in
 * bytes): a line cut there may end in part of a character, decoded as U+FFFD, which is dropped.
 */
const maxVersionBytes = 256;

/** A version line (or what the version command said when it failed) cut to maxVersionChars. */
export function clipVersion(line: string): string {
  const whole = Buffer.byteLength(line) < maxVersionBytes - 3 ? line : line.replace(/\uFFFD{1,3}$/u, "");
  return clipText(whole, maxVersionChars);
}

/** `{ engineVersion }` of a version line, cut; nothing for none. */
function versionOf(line: string | undefined): { engineVersion?: string } {
  return line === undefined ? {} : { engineVersion: clipVersion(line) };
}
