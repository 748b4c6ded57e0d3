/** The benches' command-line flags. */

/** The whole number ≥ 1 after `flag` in `args`, or `fallback` when the flag is absent. */
export function intArg(args: string[], flag: string, fallback: number): number {
  const at = args.indexOf(flag);
  if (at === -1) return fallback;
  const value = Number(args[at + 1]);
  if (!Number.isInteger(value) || value < 1) throw new Error(`expected ${flag} to be a positive integer, got "${args[at + 1]}"`);
  return value;
}
