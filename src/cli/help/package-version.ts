/** The version shardctl reports: its package.json's, read where this file is installed. */
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

let cached: string | undefined;

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
