/**
 * A run folder is written by the daemon's user on its node (root, often): the engine config, the
 * token, the logs, and the exit status a wrapper shell writes when an engine ends. Another user who
 * could write in it, or in the folders above it, could plant symbolic links at those fixed names
 * and have that user write a file of their choosing anywhere (`/etc/ld.so.preload`, an
 * authorized_keys), or swap the engine config. So before a launch writes anything there, the run
 * folder, `run/` and, on a node, `<model_dir>/.shardctl` must not be symbolic links and must be this
 * user's own folders (or root's, written by root alone); this user's lose group and other write
 * permission (a daemon started with umask 000 made them writable by all). The folders above are
 * the operator's: a model_dir may well be a shared one.
 */
import { LaunchError } from "./launch-error.js";
import type { NodeAccess } from "../nodes/index.js";

/**
 * $1 = the run folder. From the top down — a node's `.shardctl` (when the folder is under one),
 * `run/`, the run folder — each is judged before anything is made in it: a symbolic link, a folder
 * of another user than this one or root, or one of root's that others may write, prints "unsafe
 * <path> <why>" and exits 3; one that is missing is made; this user's lose group and other write
 * permission. Exit 2 with the shell's words when a folder cannot be made.
 */
const secureScript = `check() {
  if [ -L "$1" ]; then echo "unsafe $1 is a symbolic link"; exit 3; fi
  [ -e "$1" ] || mkdir "$1" || exit 2
  # Something else than a folder (a file) is no link to follow: the launch files fail on it, saying so.
  [ -d "$1" ] || exit 0
  others=$(find "$1" -maxdepth 0 \\( -perm -002 -o -perm -020 \\) 2>/dev/null)
  # Changed only when others may write it: a folder already right on a read-only disk is no error.
  if [ -O "$1" ]; then [ -z "$others" ] || chmod go-w "$1" || exit 2; return 0; fi
  owner=$(ls -ldn "$1" | awk '{print $3}')
  if [ "$owner" != 0 ]; then echo "unsafe $1 belongs to another user ($(ls -ld "$1" | awk '{print $3}'))"; exit 3; fi
  if [ -n "$others" ]; then echo "unsafe $1 is root's and writable by others"; exit 3; fi
}
run=$(dirname "$1")
top=$(dirname "$run")
if [ "$(basename "$top")" = .shardctl ]; then
  mkdir -p "$(dirname "$top")" || exit 2
  check "$top"
else
  mkdir -p "$top" || exit 2
fi
check "$run"
check "$1"`;

/** Make `runDir` on `node` (when missing), and judge it and the folders above it that shardctl makes (see secureScript) before anything is written there. */
export async function secureRunFolder(node: NodeAccess, nodeName: string, runDir: string): Promise<void> {
  const result = await node.run(["sh", "-c", secureScript, "sh", runDir], { deadlineMs: 10_000 });
  if (result.exitCode === 0) return;
  const unsafe = /^unsafe (.*)$/m.exec(result.stdout)?.[1];
  if (unsafe !== undefined) {
    throw new LaunchError(
      "RunFolderUnsafe",
      "secure-run-folder",
      `the run folder ${runDir} on ${nodeName} is not safe to write: ${unsafe}; another user could plant links there and have this daemon's user write files of their choosing. ` +
        "Remove it (shardctl makes it afresh as the node's user), or give it to the node's user (chown); on NFS with root_squash, what root makes belongs to nobody: " +
        "reach the node as a user who owns model_dir instead. Retried with back-off, not counted against the restart budget",
    );
  }
  if (result.timedOut) throw new LaunchError("NodeUnreachable", "secure-run-folder", `node ${nodeName} did not answer while the launch made its run folder ${runDir}`);
  const said = (result.stderr || result.stdout).trim().split("\n").slice(-1)[0] ?? "";
  throw new LaunchError(
    "LaunchFilesFailed",
    "secure-run-folder",
    `the run folder ${runDir} on ${nodeName} could not be made: ${said}; that folder must be writable by the node's user`,
  );
}
