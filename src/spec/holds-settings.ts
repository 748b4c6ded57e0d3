/**
 * Whether TOML text is a settings file rather than a cluster definition: it has a table only settings
 * have (`[distributed]`, `[hub]`, `[daemon]`, `[ssh]`, or `[nodes.<name>]`, where a definition's
 * `nodes` is a list). No definition may hold those keys, so a file that does is settings, whatever
 * its name (`prod-shardctl.toml`). Text that does not parse is not judged: false.
 */
import { readToml } from "./read-toml.js";

const settingsOnlyTables = ["distributed", "hub", "daemon", "ssh"];

export function holdsSettings(text: string): boolean {
  const toml = readToml(text, "");
  if (!toml.ok) return false;
  const { data } = toml;
  const nodes = data.nodes;
  return settingsOnlyTables.some((key) => key in data) || (typeof nodes === "object" && nodes !== null && !Array.isArray(nodes));
}
