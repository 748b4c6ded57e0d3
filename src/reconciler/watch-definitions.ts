/**
 * Watch the definitions directory and the settings file. Events only name a key (the cluster name,
 * the file's stem); they are debounced per key so an editor's partial writes and rename-into-place
 * saves become one pass. A status file (`<name>.status.json`) that changes or disappears is reported
 * on its own, so the daemon can put back what it last wrote (a `git clean`, a checkout of an old
 * one, a stray edit); other files never trigger anything.
 */
import { basename, resolve } from "node:path";
import { watch, type FSWatcher } from "chokidar";

const statusSuffix = ".status.json";
/** Quiet time before a status file's change is looked at, ms. */
const statusQuietMs = 1_000;

export interface DefinitionWatcher {
  close(): Promise<void>;
}

export interface WatchOptions {
  dir: string;
  settingsFile: string;
  /** A definition changed, appeared or disappeared. */
  onDefinition: (name: string) => void;
  /** A status file changed or disappeared (our own writes included: the handler compares). */
  onStatusFile?: (name: string) => void;
  /** The settings file changed: every cluster must be looked at again. */
  onSettings: () => void;
  /** Quiet time before an event is delivered, ms. Default 100. */
  debounceMs?: number;
  /**
   * The watch could not look at an entry (a symbolic link that loops, a file it may not read, no
   * descriptor left): said, never the end of the daemon, whose resync looks again anyway. Called
   * at most once a minute for the same words.
   */
  onError?: (error: Error) => void;
}

/** Least time between two reports of the same watch error, ms. */
const sameErrorEveryMs = 60_000;

export async function watchDefinitions(options: WatchOptions): Promise<DefinitionWatcher> {
  const debounceMs = options.debounceMs ?? 100;
  const settingsFile = resolve(options.settingsFile);
  const dir = resolve(options.dir);
  const parent = resolve(dir, "..");
  const timers = new Map<string, NodeJS.Timeout>();
  const debounce = (key: string, deliver: () => void, quietMs = debounceMs): void => {
    clearTimeout(timers.get(key));
    timers.set(
      key,
      setTimeout(() => {
        timers.delete(key);
        deliver();
      }, quietMs),
    );
  };

  const onEvent = (path: string): void => {
    const absolute = resolve(path);
    if (absolute === settingsFile) {
      debounce("\0settings", options.onSettings);
      return;
    }
    if (resolve(absolute, "..") !== dir) return;
    if (absolute.endsWith(statusSuffix)) {
      const name = basename(absolute, statusSuffix);
      // At most one look a second per file: another program that keeps writing it (a sync tool
      // between two checkouts) is answered at that pace, never in a tight loop.
      if (!name.startsWith(".") && options.onStatusFile !== undefined) debounce(`\0status\0${name}`, () => options.onStatusFile?.(name), statusQuietMs);
      return;
    }
    if (!absolute.endsWith(".toml")) return;
    const name = basename(absolute, ".toml");
    // Hidden files are never definitions (findClusterFiles): an editor's lock or swap file.
    if (name.startsWith(".")) return;
    debounce(name, () => options.onDefinition(name));
  };

  // The parent is watched rather than the directory itself, so a checkout that removes and
  // recreates the directory (e.g. to a commit where it was empty) keeps delivering events.
  const watcher: FSWatcher = watch([parent, settingsFile], {
    ignoreInitial: true,
    depth: 1,
    // A definition that is a symbolic link is watched through it: an edit of its target, in place
    // or renamed over it, is an event of the link's name. The resync still catches any event missed.
    followSymlinks: true,
    ignored: (path, stats) => {
      const absolute = resolve(path);
      if (absolute === parent || absolute === dir || absolute === settingsFile) return false;
      if (resolve(absolute, "..") !== dir) return true;
      // Only definitions and status files matter.
      return stats?.isFile() === true && !absolute.endsWith(".toml") && !absolute.endsWith(statusSuffix);
    },
  });
  // A directory where a status file belongs, removed, is a status file to put back. A directory
  // named as a definition (`x.toml/`) is a broken definition, which its pass reports.
  watcher.on("add", onEvent).on("change", onEvent).on("unlink", onEvent).on("unlinkDir", onEvent).on("addDir", onEvent);
  // An entry the watch cannot look at is said and passed over, whenever it happens: a definitions
  // directory with a link that loops (git stores links) must not keep the daemon from starting,
  // and an error with no listener would end the process.
  const reported = new Map<string, number>();
  watcher.on("error", (error: unknown) => {
    const failure = error instanceof Error ? error : new Error(String(error));
    // An entry the watch could not look at is still an event of its name: a definition that is a
    // link looping back on itself gets its pass, which reports it, as at the daemon's start.
    const path = (failure as NodeJS.ErrnoException).path;
    if (typeof path === "string") onEvent(path);
    const now = performance.now();
    if (now - (reported.get(failure.message) ?? -Infinity) < sameErrorEveryMs) return;
    if (reported.size > 1_000) reported.clear();
    reported.set(failure.message, now);
    options.onError?.(failure);
  });
  await new Promise<void>((resolveReady) => watcher.once("ready", () => resolveReady()));
  return {
    async close() {
      for (const timer of timers.values()) clearTimeout(timer);
      timers.clear();
      await watcher.close();
    },
  };
}
