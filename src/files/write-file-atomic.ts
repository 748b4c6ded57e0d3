/**
 * Replaces a file's content so that readers see either the old or the new file, never a partial
 * one: write a temp file in the same directory (same file system), fsync, then rename over.
 */
import { randomBytes } from "node:crypto";
import { lstat, open, realpath, rename, stat, unlink } from "node:fs/promises";
import { basename, dirname, join } from "node:path";

/**
 * Writes `text` to `file` atomically, keeping the existing file's mode (default 0644). A symbolic
 * link at `file` is replaced by the new file, unless `followLink`: then the file it leads to is
 * replaced and the link stays (an operator's config kept elsewhere and linked to, whose reader
 * reads the real file). Only for files the operator names: a link committed among files this
 * process owns could otherwise lead its writes anywhere.
 */
export async function writeFileAtomic(path: string, text: string, options: { followLink?: boolean } = {}): Promise<void> {
  const file = options.followLink === true ? await followedPath(path) : path;
  const temp = join(dirname(file), `.${basename(file)}.${process.pid}.${randomBytes(4).toString("hex")}.tmp`);
  const mode = await stat(file).then(
    (info) => info.mode & 0o7777,
    () => 0o644,
  );
  try {
    const handle = await open(temp, "wx", mode);
    try {
      // The mode itself, not as the umask trims it: a daemon started under umask 077 would write
      // status files that the people and CI jobs reading them cannot open.
      await handle.chmod(mode);
      await handle.writeFile(text, "utf8");
      await handle.sync();
    } finally {
      await handle.close();
    }
    await rename(temp, file);
  } catch (error) {
    await unlink(temp).catch(() => undefined);
    throw error;
  }
}

/**
 * The file a link at `path` leads to, when this process may trust it: the link and its target
 * owned by this user or by root (as the kernel's protected_symlinks asks of links in shared
 * directories), so that whoever else can write the directory cannot lead these writes to a file of
 * their choosing. `path` itself when it is no link, or a link to nothing (it is replaced then);
 * any other failure to resolve it is thrown, not taken for "no link".
 */
async function followedPath(path: string): Promise<string> {
  const link = await lstat(path).catch((error: NodeJS.ErrnoException) => {
    if (error.code === "ENOENT") return undefined;
    throw error;
  });
  if (link === undefined || !link.isSymbolicLink()) return path;
  const real = await realpath(path).catch((error: NodeJS.ErrnoException) => {
    if (error.code === "ENOENT") return undefined;
    throw error;
  });
  if (real === undefined) return path;
  const target = await stat(real);
  const me = process.getuid?.() ?? 0;
  const trusted = (uid: number): boolean => uid === me || uid === 0;
  if (!trusted(link.uid) || !trusted(target.uid)) {
    throw new Error(
      `${path} is a symbolic link to ${real}, and ${trusted(link.uid) ? `the file is owned by uid ${target.uid}` : `the link is owned by uid ${link.uid}`}, neither this user nor root: not written through; make the link and its file this user's, or name the file itself`,
    );
  }
  return real;
}
