/**
 * The two commits a status file names, each for its own question:
 * - `gitCommit`, the last commit that touched the definition file: what changed this cluster;
 * - `gitHead`, the commit the checkout holding the definitions directory is at (HEAD): what the
 *   daemon is looking at, which moves with every pull, whatever file it changed.
 * Neither ever throws: outside a repository (or without git) both are undefined.
 */
import { execFile } from "node:child_process";
import { readFile, stat } from "node:fs/promises";
import { basename, dirname, join, resolve } from "node:path";

/**
 * The last commit that touched `file`, when it is inside a git repository and committed as it is
 * on disk; undefined otherwise (no git, not a repository, uncommitted, or edited since: that commit
 * would name a file that says something else than what runs).
 */
export async function lastCommitOf(file: string): Promise<string | undefined> {
  const [out, changes] = await Promise.all([
    git(["log", "-1", "--format=%H", "--", basename(file)], dirname(file)),
    // Without the index lock `git status` may take to refresh the index: an operator's git command
    // run at that moment in the checkout would fail on it.
    git(["--no-optional-locks", "status", "--porcelain", "--", basename(file)], dirname(file)),
  ]);
  const commit = out?.trim();
  if (changes === undefined || changes.trim() !== "") return undefined;
  return commit !== undefined && isCommit(commit) ? commit : undefined;
}

/** HEAD of the checkout holding a directory, and what is needed to notice cheaply that it moved. */
export interface CheckoutHead {
  /** The definition revision it was looked up for: a new revision looks again. */
  revision: string;
  /** HEAD's commit; undefined outside a repository or before its first commit. */
  commit: string | undefined;
  /** The repository's git directory and common directory (refs live there); unset outside a repository. */
  gitDir?: string;
  commonDir?: string;
  /** HEAD's file and the ref file it names, as read when `commit` was looked up. */
  stamp?: string;
}

/**
 * HEAD of the repository holding `dir`. Running git on every pass of every cluster would be a
 * process per cluster per resync (30 s), so git runs once per definition revision, and otherwise
 * only when HEAD moved: a pass reads `.git/HEAD` and the ref file it names (or `packed-refs`),
 * two reads of a few bytes, and compares them with what they held at the last look. A commit, a
 * pull, a checkout or a reset rewrites one of them. Outside a repository nothing is read until the
 * next revision.
 */
export async function checkoutHeadOf(dir: string, revision: string, previous?: CheckoutHead): Promise<CheckoutHead> {
  if (previous?.revision === revision) {
    if (previous.gitDir === undefined || previous.commonDir === undefined) return previous;
    const stamp = await headStamp(previous.gitDir, previous.commonDir);
    if (stamp === previous.stamp) return previous;
    const out = await git(["rev-parse", "--verify", "-q", "HEAD"], dir);
    const commit = out?.trim();
    return { ...previous, stamp, commit: commit !== undefined && isCommit(commit) ? commit : undefined };
  }
  // One process finds the repository and its HEAD (the last line is "HEAD" itself before the first commit).
  const out = await git(["rev-parse", "--absolute-git-dir", "--git-common-dir", "HEAD"], dir, true);
  const [gitDir, commonDir, head] = (out ?? "").split("\n").map((line) => line.trim());
  if (gitDir === undefined || gitDir === "" || commonDir === undefined || commonDir === "") return { revision, commit: undefined };
  const common = resolve(dir, commonDir);
  // Stamped before HEAD is resolved: a commit landing in between is noticed at the next pass.
  const stamp = await headStamp(gitDir, common);
  return { revision, commit: head !== undefined && isCommit(head) ? head : undefined, gitDir, commonDir: common, stamp };
}

/** HEAD's content and the content of the ref it names (or packed-refs' identity when the ref is packed). */
async function headStamp(gitDir: string, commonDir: string): Promise<string> {
  const head = await readFile(join(gitDir, "HEAD"), "utf8").catch(() => "");
  const ref = /^ref: (refs\/\S+)/.exec(head)?.[1];
  if (ref === undefined) return head;
  const loose = await readFile(join(commonDir, ref), "utf8").catch(() => undefined);
  if (loose !== undefined) return `${head}|${loose}`;
  const packed = await stat(join(commonDir, "packed-refs")).then(
    (s) => `${s.ino}:${s.size}:${s.mtimeMs}`,
    () => "none",
  );
  return `${head}|packed ${packed}`;
}

/** stdout of `git <args>` in `cwd`; undefined when it fails (unless `keepOnFailure`), after 5 s at most. */
function git(args: string[], cwd: string, keepOnFailure = false): Promise<string | undefined> {
  return new Promise((done) => {
    execFile("git", args, { cwd, timeout: 5_000 }, (error, stdout) => done(error === null || keepOnFailure ? String(stdout) : undefined));
  });
}

function isCommit(text: string): boolean {
  return /^[0-9a-f]{40}([0-9a-f]{24})?$/.test(text);
}
