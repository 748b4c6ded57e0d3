/**
 * Calls `onChange` after the config file changes. Watches the directory, not the file: editors and
 * our own atomic writes replace the file by rename, which would orphan a watch on the old inode.
 */
import { watch } from "node:fs";
import { basename, dirname } from "node:path";

/**
 * Debounce defaults to 50 ms: one reload per burst of events (write + rename). `companions` are
 * other files in the same directory whose changes also call `onChange` (the relaunch marks beside
 * the YAML). Returns a stop function.
 */
export function watchConfig(file: string, onChange: () => void, onError: (error: Error) => void, debounceMs = 50, companions: readonly string[] = []): () => void {
  const names = new Set([basename(file), ...companions.map((companion) => basename(companion))]);
  let timer: NodeJS.Timeout | undefined;
  const watcher = watch(dirname(file), { persistent: false }, (_event, filename) => {
    // filename can be null on some platforms; reload then, since it may be ours.
    if (filename !== null && !names.has(filename.toString())) return;
    clearTimeout(timer);
    timer = setTimeout(onChange, debounceMs);
  });
  watcher.on("error", onError);
  return () => {
    clearTimeout(timer);
    watcher.close();
  };
}
