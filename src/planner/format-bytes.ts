const units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];

/** Human-readable binary size: "512 B", "1.5 KiB", "62.3 GiB" (one decimal above bytes). */
export function formatBytes(bytes: number): string {
  const sign = bytes < 0 ? "-" : "";
  let value = Math.abs(bytes);
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  if (unit === 0) return `${sign}${Math.round(value)} B`;
  // 1023.96 KiB would print as "1024.0 KiB": promote it.
  if (Number(value.toFixed(1)) >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return `${sign}${value.toFixed(1)} ${units[unit]}`;
}
