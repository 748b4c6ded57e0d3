/**
 * What to say when a process ran out of file descriptors. Node loads a program's modules many at a
 * time, so shardctl needs about 200 descriptors before a command runs a line of its own, and its
 * daemon one per SSH connection, watched folder and client. Node raises the soft limit to the hard
 * one as it starts, so only a low hard limit (a service manager's or container's) runs short; it
 * failed with a bare EMFILE stack, or with Node's "Cannot find package" for a file that is there.
 */
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";

/** The soft and hard limits of open files of this process (Linux), or undefined where unknown (or no descriptor is free to read them). */
function openFileLimits(): { soft: string; hard: string } | undefined {
  try {
    const [, soft, hard] = /^Max open files\s+(\S+)\s+(\S+)/m.exec(readFileSync("/proc/self/limits", "utf8")) ?? [];
    return soft === undefined || hard === undefined ? undefined : { soft, hard };
  } catch {
    return undefined;
  }
}

/**
 * Words for an error that is a shortage of file descriptors (EMFILE: this process's limit; ENFILE:
 * the whole system's), saying what ran out and how to raise it; undefined for any other error.
 * `program` names the program in the words ("shardctl", "shard-engine").
 */
export function outOfDescriptorsAdvice(error: unknown, program: string): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  if (code === "ERR_MODULE_NOT_FOUND" && moduleIsThere(error) && limitIsLow()) return emfileAdvice(program);
  if (code === "ENFILE") {
    return `${program} could not open a file: the system's table of open files is full (ENFILE); close programs holding many files, or raise fs.file-max`;
  }
  return code === "EMFILE" ? emfileAdvice(program) : undefined;
}

/**
 * Whether Node's "Cannot find module '<path>'" names a file that is there, or its "Cannot find
 * package '<dir>/index.js'" a package that is there (a package.json in <dir>): Node 20's resolver
 * says so when it could not open the file for want of a descriptor.
 */
function moduleIsThere(error: unknown): boolean {
  const [, kind, path] = /^Cannot find (package|module) '(\/[^']+)'/.exec(error instanceof Error ? error.message : "") ?? [];
  if (path === undefined) return false;
  return kind === "module" ? existsSync(path) : existsSync(join(dirname(path), "package.json"));
}

/**
 * Whether this process may open few files (a hard limit under 1024), or the limits cannot be read
 * (no descriptor left to read them): a package that is there but not found is a broken install
 * otherwise (a `main` naming a missing file), not a shortage.
 */
function limitIsLow(): boolean {
  const limits = openFileLimits();
  return limits === undefined || (Number(limits.hard) < 1024 && limits.hard !== "unlimited");
}

function emfileAdvice(program: string): string {
  const limits = openFileLimits();
  const now = limits === undefined ? "too few files" : `at most ${limits.hard} files`;
  return (
    `${program} ran out of file descriptors (EMFILE): this process may open ${now} (its hard limit: Node raises the soft one to it); ` +
    `shardctl needs about 200 to start, and a daemon one more per node connection, watched folder and client: raise the hard limit ` +
    `where the process is started (LimitNOFILE= in a systemd unit, nofile in /etc/security/limits.conf, a container's --ulimit nofile=…)`
  );
}
