/**
 * Installing a Debian package for a test's set-up (as root). Test files run side by side, and
 * two apt-get runs at once fail on dpkg's lock: our own installs queue on one flock
 * (util-linux, essential in Debian), and a dpkg run by something else on this machine is waited
 * for (dpkg's lock timeout, 10 minutes). An `apt-get update` run by something else still makes
 * ours fail at once: apt has no wait for its package lists' lock. On the 15-minute timeout only
 * flock is killed; an apt-get it started finishes on its own. No vitest imports (bench uses the
 * fixtures too).
 */
import { execFile } from "node:child_process";
import { promisify } from "node:util";

const run = promisify(execFile);

/** apt-get update, then install `packages` (extra apt-get install options before them). */
export async function aptInstall(packages: string[], installOptions: string[] = []): Promise<void> {
  const lock = "-o DPkg::Lock::Timeout=600";
  const script = `apt-get ${lock} update && DEBIAN_FRONTEND=noninteractive apt-get ${lock} install -y ${[...installOptions, ...packages].join(" ")}`;
  await run("flock", ["/tmp/apt.lock", "sh", "-c", script], { maxBuffer: 64 << 20, timeout: 15 * 60_000 });
}
