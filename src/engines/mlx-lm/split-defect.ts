/**
 * mlx-lm before 0.32.0 started each rank at (N - r - 1) × its own layer count, so when the layers
 * do not divide evenly some layers never run and others run twice — silently (61 layers on 2
 * ranks: rank 1 runs layers 0-29 and rank 0 starts at layer 31, so layer 30 never runs).
 * 0.32.0 sums the counts of the ranks after it instead.
 */
const fixedIn = [0, 32, 0] as const;

/**
 * Why `version` (a probe's "mlx-lm 0.31.3 mlx 0.31.1", or a declared "0.31.3") would run `layers`
 * over `stages` ranks wrongly, or undefined when it would not (or the version cannot be read).
 */
export function describeSplitDefect(version: string, layers: number, stages: number): string | undefined {
  const found = /(?:^|mlx-lm\s+)(\d+)\.(\d+)\.(\d+)/.exec(version.trim());
  if (found === null || stages < 1) return undefined;
  const parsed = [Number(found[1]), Number(found[2]), Number(found[3])];
  if (!isOlder(parsed, fixedIn) || layers % stages === 0) return undefined;
  const run = new Array<number>(layers).fill(0);
  const base = Math.floor(layers / stages);
  for (let rank = 0; rank < stages; rank++) {
    const count = base + (rank < layers % stages ? 1 : 0);
    const start = (stages - rank - 1) * count;
    for (let layer = start; layer < Math.min(layers, start + count); layer++) run[layer]! += 1;
  }
  const skipped = run.flatMap((n, layer) => (n === 0 ? [layer] : []));
  const twice = run.flatMap((n, layer) => (n > 1 ? [layer] : []));
  const what = [skipped.length > 0 ? `never runs layer ${skipped.join(", ")}` : "", twice.length > 0 ? `runs layer ${twice.join(", ")} twice` : ""].filter(
    (s) => s !== "",
  );
  return `mlx-lm ${parsed.join(".")} splits ${layers} layers over ${stages} ranks wrongly (it ${what.join(" and ")}); fixed in mlx-lm ${fixedIn.join(".")}: upgrade it, or use a number of nodes that divides ${layers}`;
}

function isOlder(version: readonly number[], than: readonly number[]): boolean {
  for (let i = 0; i < than.length; i++) if (version[i]! !== than[i]!) return version[i]! < than[i]!;
  return false;
}
