/** How numbers and times read on the page: binary units for bytes, short durations, relative ages. */

const units = ["B", "KiB", "MiB", "GiB", "TiB"];

/** 1536 → "1.5 KiB". */
export function formatBytes(bytes: number): string {
  let value = bytes;
  let unit = 0;
  while (Math.abs(value) >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return `${unit === 0 ? value : value.toFixed(value >= 100 ? 0 : 1)} ${units[unit]}`;
}

/** 1250 → "1.3 s", 90 000 → "1 min 30 s", 42 → "42 ms". */
export function formatDuration(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const seconds = ms / 1000;
  if (seconds < 60) return `${seconds.toFixed(seconds < 10 ? 1 : 0)} s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 60) return `${minutes} min ${Math.round(seconds % 60)} s`;
  const hours = Math.floor(minutes / 60);
  return hours < 48 ? `${hours} h ${minutes % 60} min` : `${Math.floor(hours / 24)} d`;
}

/** The age of an RFC 3339 time at `now` (ms since the epoch). */
export function formatAge(at: string, now: number): string {
  const ms = now - Date.parse(at);
  // The page's clock ticks once a second: an age under that is "just now", not "0 ms".
  return ms < 1000 ? "just now" : formatDuration(ms);
}

/** "12:03:04" in the reader's time zone. */
export function formatClock(at: string | number): string {
  return new Date(at).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit" });
}

/** The first 12 characters of a revision or commit, as `shardctl status` prints them. */
export function short(revision: string | undefined): string {
  return revision === undefined || revision === "" ? "–" : revision.slice(0, 12);
}
