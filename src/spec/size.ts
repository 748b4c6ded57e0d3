/** Sizes in definitions ("64GiB", "512MB", 1073741824) parsed to byte counts. */
import { ShardctlError } from "../errors/index.js";
import { allowed, patterns, quote } from "./patterns.js";

// SI units are powers of 1000, binary units powers of 1024, as in `ls -h --si` vs `ls -h`.
const unitBytes: Record<string, number> = {
  "": 1,
  B: 1,
  KB: 1e3,
  MB: 1e6,
  GB: 1e9,
  TB: 1e12,
  KiB: 2 ** 10,
  MiB: 2 ** 20,
  GiB: 2 ** 30,
  TiB: 2 ** 40,
};

/** Parse a size to bytes (rounded down to a whole byte). Throws ShardctlError `InvalidSize`. */
export function parseSize(text: string): number {
  const match = patterns.size.test(text) ? /^([0-9.]+) ?([A-Za-z]*)$/.exec(text) : null;
  const unit = match?.[2] ?? "";
  const bytes = match === null ? Number.NaN : Math.floor(Number(match[1]) * (unitBytes[unit] ?? Number.NaN));
  if (Number.isFinite(bytes) && bytes > Number.MAX_SAFE_INTEGER) {
    throw new ShardctlError("InvalidSize", `${quote(text)} is too large: a size is at most ${Number.MAX_SAFE_INTEGER} bytes (just under 8 PiB)`, { terminal: true });
  }
  if (!Number.isSafeInteger(bytes)) {
    throw new ShardctlError("InvalidSize", `${quote(text)} is not a size: expected ${allowed.size}`, { terminal: true });
  }
  return bytes;
}
