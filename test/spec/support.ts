/** Shared helpers of the spec tests: the fixture registry and reading fixture files. */
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { parseSettings, type Settings } from "../../src/spec/index.js";

export const fixtures = fileURLToPath(new URL("./fixtures/", import.meta.url));
export const repoRoot = fileURLToPath(new URL("../../", import.meta.url));

/** The registry (studio-1, studio-2) the bad-definition fixtures are checked against. */
export function fixtureSettings(): Settings {
  const file = `${fixtures}shardctl.toml`;
  const result = parseSettings(readFileSync(file, "utf8"), file);
  if (!result.ok) throw new Error(`fixture settings invalid: ${JSON.stringify(result.issues)}`);
  return result.value;
}

/** Parse settings text that must be valid. */
export function settingsFrom(text: string, file = "/srv/ops/shardctl.toml"): Settings {
  const result = parseSettings(text, file);
  if (!result.ok) throw new Error(`settings invalid: ${JSON.stringify(result.issues)}`);
  return result.value;
}
