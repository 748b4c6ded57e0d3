/** The version shardctl reports: its package.json's, read where this file is installed. */
import { readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

let cached: string | undefined;
/** The directory of shardctl's package.json, once found. */
let packageDir: string | undefined;

/**
 * The `version` of the nearest package.json named "shardctl" above this file. Read at run time so
 * one rule holds for the source tree (src/cli/help), the build (dist/src/cli/help) and an installed
 * package (<prefix>/lib/node_modules/shardctl/dist/src/cli/help), with nothing generated at build.
 */
export function packageVersion(): string {
  if (cached !== undefined) return cached;
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const manifest = readManifest(join(dir, "package.json"));
    if (manifest?.name === "shardctl" && typeof manifest.version === "string") {
      cached = manifest.version;
      packageDir = dir;
      return cached;
    }
    const parent = dirname(dir);
    // A shardctl file with no shardctl package.json above it is a broken install, not a usage error.
    if (parent === dir) throw new Error(`no package.json of shardctl above ${fileURLToPath(import.meta.url)}: the installation is incomplete`);
    dir = parent;
  }
}

function readManifest(file: string): { name?: unknown; version?: unknown } | undefined {
  try {
    return JSON.parse(readFileSync(file, "utf8")) as { name?: unknown; version?: unknown };
  } catch {
    // Missing or not JSON: keep looking further up.
    return undefined;
  }
}

/**
 * "0.1.0 (commit 0123456789ab)": the package's version and, for an installation that is a git
 * checkout (built from a clone, as the README's set-up does), the commit it is at, read from the
 * repository's files (no git needed). Two builds of one version number are told apart by it.
 */
export function describeVersion(): string {
  const version = packageVersion();
  const commit = packageDir === undefined ? undefined : checkoutCommit(packageDir);
  return commit === undefined ? version : `${version} (commit ${commit.slice(0, 12)})`;
}

/** The commit checked out in `dir` (its .git a folder, or a worktree's file naming one); undefined when it is no checkout or cannot be read. */
function checkoutCommit(dir: string): string | undefined {
  const read = (file: string): string | undefined => {
    try {
      return readFileSync(file, "utf8").trim();
    } catch {
      return undefined;
    }
  };
  const isCommit = (text: string | undefined): text is string => text !== undefined && /^[0-9a-f]{40}([0-9a-f]{24})?$/.test(text);
  // A folder cannot be read as a file: undefined, and .git is that folder.
  const pointer = read(join(dir, ".git"));
  const gitDir = pointer?.startsWith("gitdir:") === true ? resolve(dir, pointer.slice("gitdir:".length).trim()) : join(dir, ".git");
  const head = read(join(gitDir, "HEAD"));
  if (isCommit(head)) return head;
  const ref = /^ref:\s*(refs\/\S+)$/.exec(head ?? "")?.[1];
  if (ref === undefined) return undefined;
  // A worktree's branches live in the repository it belongs to (its commondir).
  const common = read(join(gitDir, "commondir"));
  for (const base of [gitDir, ...(common === undefined ? [] : [resolve(gitDir, common)])]) {
    const loose = read(join(base, ref));
    if (isCommit(loose)) return loose;
    const packed = read(join(base, "packed-refs"))
      ?.split("\n")
      .find((line) => line.endsWith(` ${ref}`))
      ?.split(" ")[0];
    if (isCommit(packed)) return packed;
  }
  return undefined;
}
