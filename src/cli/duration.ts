import { UsageError } from "./usage-error.js";

/** "10m", "30s", "500ms", "1h", "1h30m" → milliseconds. */
export function parseDuration(text: string, flag: string): number {
  const parts = [...text.matchAll(/(\d+(?:\.\d+)?)(ms|s|m|h)/g)];
  if (parts.length === 0 || parts.map((p) => p[0]).join("") !== text) {
    throw new UsageError(`expected --${flag} to be a duration like 30s, 10m or 1h, got "${text}"`);
  }
  const unit: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };
  return parts.reduce((sum, p) => sum + Number(p[1]) * unit[p[2]!]!, 0);
}
