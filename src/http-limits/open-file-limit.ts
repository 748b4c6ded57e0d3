/** The descriptors this process may hold open (its RLIMIT_NOFILE soft limit, which Node raises to the hard one at start). */
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";

/** When the limit cannot be read: the smallest limit common systems give a process. */
const fallbackLimit = 1024;

let cached: number | undefined;

/** The limit, read once: /proc/self/limits on Linux, `ulimit -n` of a child shell elsewhere (it inherits ours). */
export function openFileLimit(): number {
  cached ??= readLimit() ?? fallbackLimit;
  return cached;
}

function readLimit(): number | undefined {
  try {
    if (process.platform === "linux") {
      const line = readFileSync("/proc/self/limits", "utf8")
        .split("\n")
        .find((l) => l.startsWith("Max open files"));
      const soft = line?.slice("Max open files".length).trim().split(/\s+/)[0];
      return parseLimit(soft);
    }
    const shell = spawnSync("sh", ["-c", "ulimit -n"], { encoding: "utf8", timeout: 2_000 });
    return parseLimit(shell.stdout?.trim());
  } catch {
    return undefined;
  }
}

function parseLimit(text: string | undefined): number | undefined {
  if (text === "unlimited") return Number.MAX_SAFE_INTEGER;
  const n = Number(text);
  return Number.isSafeInteger(n) && n > 0 ? n : undefined;
}
