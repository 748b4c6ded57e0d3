/**
 * Replaces a file's content so that readers see either the old or the new file, never a partial
 * one: write a temp file in the same directory (same file system), fsync, then rename over.
 */
import { randomBytes } from "node:crypto";
import { open, realpath, rename, stat, unlink } from "node:fs/promises";
import { basename, dirname, join } from "node:path";

/**
 * Writes `text` to `file` atomically, keeping the existing file's mode (default 0644). A symbolic
 * link at `file` is replaced by the new file, unless `followLink`: then the file it leads to is
 * replaced and the link stays (an operator's config kept elsewhere and linked to, whose reader
 * reads the real file). Only for files the operator names: a link committed among files this
 * process owns could otherwise lead its writes anywhere.
 */
export async function writeFileAtomic(path: string, text: string, options: { followLink?: boolean } = {}): Promise<void> {
  // A dangling link has no real path: it is replaced, as when not following.
  const file = options.followLink === true ? await realpath(path).catch(() => path) : path;
  const temp = join(dirname(file), `.${basename(file)}.${process.pid}.${randomBytes(4).toString("hex")}.tmp`);
  const mode = await stat(file).then(
    (info) => info.mode & 0o7777,
    () => 0o644,
  );
  try {
    const handle = await open(temp, "wx", mode);
    try {
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
