/**
 * The allowed name a mistyped one most likely meant, for "did you mean" in messages: the same name
 * in another spelling (case, `-`, `_`, spaces: `context-length`, `contextLength`), one within a few
 * edits (`treads`, `max_sequence`), or else the only one it begins (`identity` for `identity_file`).
 * None when nothing is that close: a wrong guess misleads more than no guess.
 */
export function closestName(name: string, allowed: readonly string[]): string | undefined {
  // Far longer than any name it could mean (and each comparison costs its length times theirs).
  if (name.length > maxNameLength) return undefined;
  const plain = spelling(name);
  const same = allowed.find((candidate) => spelling(candidate) === plain);
  if (same !== undefined) return same;

  // About one edit in three characters, at least one: "tread" → "threads" is 2 of 6 and found,
  // "size" → "id" is 3 of 4 and not.
  const limit = Math.max(1, Math.floor(plain.length / 3));
  let best: string | undefined;
  let bestDistance = limit + 1;
  for (const candidate of allowed) {
    const distance = editDistance(plain, spelling(candidate));
    if (distance < bestDistance) {
      best = candidate;
      bestDistance = distance;
    }
  }
  if (best !== undefined) return best;
  // A name cut short (`identity` for identity_file): the one allowed name it begins, when only one
  // does and it is no mere syllable (4 characters at least).
  const longer = plain.length >= 4 ? allowed.filter((candidate) => spelling(candidate).startsWith(plain)) : [];
  return longer.length === 1 ? longer[0] : undefined;
}

/** Names longer than this get no guess, characters. */
const maxNameLength = 64;

/** A name without case or word separators. */
function spelling(name: string): string {
  return name.toLowerCase().replace(/[-_\s]/g, "");
}

/** Edits (insert, delete, replace, swap of neighbours) that turn `a` into `b`. */
function editDistance(a: string, b: string): number {
  const rows = Array.from({ length: a.length + 1 }, (_, i) => Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)));
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let d = Math.min(rows[i - 1]![j]! + 1, rows[i]![j - 1]! + 1, rows[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d = Math.min(d, rows[i - 2]![j - 2]! + 1);
      rows[i]![j] = d;
    }
  }
  return rows[a.length]![b.length]!;
}

/**
 * A host one typo from "local" (the control machine, reached without SSH), as "locall" or "lcoal"
 * are; one that starts with another letter ("focal", "vocal") is taken for a real name.
 */
export function isNearLocal(host: string): boolean {
  return host !== "local" && /^l/i.test(host) && closestName(host, ["local"]) !== undefined;
}
