/**
 * Reading the text of a definition or the settings: a regular file within a size cap, opened once
 * and checked on the opened descriptor (src/files), so a FIFO, a directory or a device named as a
 * definition is an error at once instead of a `validate` or a daemon pass that never returns.
 */
import { lstat, readlink, realpath } from "node:fs/promises";
import { dirname, resolve } from "node:path";
import { showText } from "../errors/index.js";
import { FileRefusedError, isWithin, readRegularText, workingTreeOf } from "../files/index.js";

/** Largest cluster definition read, bytes (1 MiB). A definition is about 1 KB; a heavily commented one stays under 50 KB. */
export const maxDefinitionBytes = 1024 * 1024;

/** Largest settings file read, bytes (4 MiB). Each registered node takes a few hundred bytes; 4 MiB holds thousands. */
export const maxSettingsBytes = 4 * 1024 * 1024;

/**
 * The text of cluster definition `file`. Throws Node's error when it cannot be opened (ENOENT,
 * EACCES), ShardctlError `NotRegularFile` or `FileTooLarge` when it is refused.
 */
export async function readClusterText(file: string): Promise<string> {
  await refuseForeignLink(file);
  return readRegularText(file, { maxBytes: maxDefinitionBytes, what: "cluster definition" });
}

/**
 * A definition read through a symbolic link (the file itself, or a folder on its path: the
 * definitions directory replaced by a committed link) must lead to another definition: a `.toml`
 * file, and, when the definition lies in a git working tree, one of that tree. Git stores links, so
 * whoever can commit a definition could otherwise point it at any file the daemon may read (a
 * transport token, a Hub token, a key), and the parse errors that quote it would carry it into the
 * status file, the dashboard, the log and CI's output. A link to nothing is left to the read, which
 * says so.
 */
async function refuseForeignLink(file: string): Promise<void> {
  const real = await realpath(file).catch(() => undefined);
  // Where it is named, through no link on its path (every definition but a linked one): nothing to
  // look up. This runs at every pass's read of a definition, so the walk up to its tree is spared.
  if (real === undefined || real === resolve(file)) return;
  const tree = await workingTreeOf(dirname(file));
  const linked = (await lstat(file).catch(() => undefined))?.isSymbolicLink() === true;
  const inTree = tree === undefined || isWithin(tree, real);
  if ((!linked || real.endsWith(".toml")) && inTree) return;
  const target = showText(linked ? await readlink(file).catch(() => real) : real);
  const where = !inTree ? `outside the git working tree ${showText(tree ?? "")} that holds the definition` : "which is not a definition (a .toml file)";
  throw new FileRefusedError(
    "DefinitionLinkRefused",
    file,
    `the cluster definition is ${linked ? "a symbolic link" : "reached through a symbolic link"} to ${target}, ${where}: a definition may link only to another definition of its repository, so a committed link cannot show other files of this machine; replace the link with the definition itself`,
  );
}

/** The text of settings file `file`; throws as `readClusterText` does. */
export function readSettingsText(file: string): Promise<string> {
  return readRegularText(file, { maxBytes: maxSettingsBytes, what: "settings file" });
}
