/**
 * A run folder is written by the daemon's user on its node (root, often): the engine config, the
 * token, the logs, and the exit status a wrapper shell writes when an engine ends. Another user who
 * could write in it, or in the folders above it, could plant symbolic links at those fixed names
 * and have that user write a file of their choosing anywhere (`/etc/ld.so.preload`, an
 * authorized_keys), or swap the engine config. So before a launch writes anything there, the run
 * folder, `run/` and, on a node, `<model_dir>/.shardctl` must be this user's own folders, not
 * symbolic links; group and others lose write permission on them (a daemon started with umask 000
 * made them writable by all). The control machine's run folders are under the state directory,
 * whose permissions are its owner's choice.
 */
import { LaunchError } from "./launch-error.js";
import type { NodeAccess } from "../nodes/index.js";

/**
 * $1 = the run folder. Made when missing; then, for it, its parent and — when that is a node's
 * `.shardctl` — their parent: "unsafe <path> <why>" and exit 3 for a symbolic link or a folder of
 * another user, else group and other write permission removed. Exit 2 with the shell's words when
 * the folder cannot be made.
 */
const secureScript = `mkdir -p "$1" || exit 2
x=$1
for level in 1 2 3; do
  if [ "$level" = 3 ] && [ "$(basename "$x")" != .shardctl ]; then break; fi
  if [ -L "$x" ]; then echo "unsafe $x is a symbolic link"; exit 3; fi
  if [ ! -O "$x" ]; then echo "unsafe $x belongs to another user ($(ls -ld "$x" | awk '{print $3}'))"; exit 3; fi
  chmod go-w "$x" || exit 2
  x=$(dirname "$x")
done`;

/** Make `runDir` on `node` (when missing) and make sure it and the two folders above it are this user's and writable by it alone. */
export async function secureRunFolder(node: NodeAccess, nodeName: string, runDir: string): Promise<void> {
  const result = await node.run(["sh", "-c", secureScript, "sh", runDir], { deadlineMs: 10_000 });
  if (result.exitCode === 0) return;
  const unsafe = /^unsafe (.*)$/m.exec(result.stdout)?.[1];
  if (unsafe !== undefined) {
    throw new LaunchError(
      "RunFolderUnsafe",
      "secure-run-folder",
      `the run folder ${runDir} on ${nodeName} is not safe to write: ${unsafe}; another user could plant links there and have this daemon's user write files of their choosing. ` +
        "Remove it (shardctl makes it afresh as the node's user), or give it to the node's user (chown); retried with back-off, not counted against the restart budget",
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
