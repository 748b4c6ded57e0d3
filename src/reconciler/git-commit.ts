import { execFile } from "node:child_process";
import { basename, dirname } from "node:path";

/**
 * The last commit that touched `file`, when it is inside a git repository and committed;
 * undefined otherwise (no git, not a repository, uncommitted). Never throws.
 */
export function lastCommitOf(file: string): Promise<string | undefined> {
  return new Promise((resolve) => {
    execFile("git", ["log", "-1", "--format=%H", "--", basename(file)], { cwd: dirname(file), timeout: 5_000 }, (error, stdout) =>
      resolve(error === null && /^[0-9a-f]{40}$/.test(stdout.trim()) ? stdout.trim() : undefined),
    );
  });
}
