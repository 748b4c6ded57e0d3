/**
 * A push source inside a git working tree (the definitions' repository, say) is content anyone who
 * can commit there controls, and git stores symlinks: a committed `leak.json -> /etc/shadow` would
 * have the daemon read a file its user may read and copy it to every node. So inside a working
 * tree, the source folder and every link in it must lead to files of that same tree. A folder
 * outside any repository is the operator's own, and its links are followed wherever they lead
 * (`hf download --local-dir` links into the HF cache; weights kept on another disk).
 */
import { ShardctlError, showText } from "../errors/index.js";
import { isWithin, workingTreeOf } from "../files/index.js";

export interface RepositoryBoundary {
  /** The working tree's root, its real path. */
  root: string;
}

/** The working tree `dir` is in (found by a `.git` entry above it, as written), or undefined. */
export async function repositoryBoundaryOf(dir: string): Promise<RepositoryBoundary | undefined> {
  const root = await workingTreeOf(dir);
  return root === undefined ? undefined : { root };
}

/** Refuse `path` (under the source `dir`) when its real path leaves the boundary. */
export async function assertInsideRepository(boundary: RepositoryBoundary, dir: string, path: string, real: string): Promise<void> {
  if (isWithin(boundary.root, real)) return;
  const what = path === "" ? `the push source ${dir} is a link to ${showText(real)}` : `the push source ${dir}: ${showText(path)} links to ${showText(real)}`;
  throw new ShardctlError(
    "PushSourceInvalid",
    `${what}, outside the git repository ${showText(boundary.root)} that holds the folder: links committed to a repository must not reach other files of this machine; copy the file into the folder, or keep the model outside the repository`,
    { terminal: true },
  );
}
