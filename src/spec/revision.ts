/**
 * The revision identity of a cluster: sha256 over the normalised definition plus the registry
 * entries of the nodes it uses. Key order is fixed, so whitespace, comments and key order in the
 * files do not change it; editing a used node's entry does. Paths under the settings directory are
 * hashed relative to it, so two checkouts of the same commit agree.
 */
import { createHash } from "node:crypto";
import { relative, sep } from "node:path";
import type { ClusterSpec, NodeEntry, Settings } from "./types.js";

/** Hex sha256 of the definition and the registry entries of its stage and coordinator nodes. */
export function computeRevision(spec: ClusterSpec, settings: Settings): string {
  const used = [...spec.nodes, spec.coordinator.node].filter((name, index, all) => all.indexOf(name) === index);
  const nodes = used.flatMap((name) => {
    const entry = settings.nodes[name];
    return entry === undefined ? [] : [portableEntry(entry, settings.dir)];
  });
  return sha256(stableStringify({ definition: hashedDefinition(spec), nodes }));
}

/**
 * Hex sha256 of the definition alone, without the registry entries its revision also covers: two
 * revisions with the same digest differ only in the registry (a node's host, memory or key edited
 * in the settings file), which is how `shardctl diff` says why a cluster whose file is unchanged
 * would be replaced.
 */
export function definitionDigest(spec: ClusterSpec): string {
  return sha256(stableStringify({ definition: hashedDefinition(spec) }));
}

/** What of a definition its revision covers: not where its file or its model directory lie. */
function hashedDefinition(spec: ClusterSpec): object {
  const { file: _file, ...definition } = spec;
  const { path: _path, ...model } = definition.model;
  return { ...definition, model };
}

function sha256(text: string): string {
  return createHash("sha256").update(text).digest("hex");
}

function portableEntry(entry: NodeEntry, dir: string): NodeEntry {
  const portable = (path: string): string => {
    const rel = relative(dir, path);
    return rel.startsWith("..") || rel === "" ? path : `./${rel.split(sep).join("/")}`;
  };
  return {
    ...entry,
    modelDir: entry.local ? portable(entry.modelDir) : entry.modelDir,
    ...(entry.identityFile === undefined ? {} : { identityFile: portable(entry.identityFile) }),
  };
}

/** JSON with object keys sorted at every level. */
export function stableStringify(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(stableStringify).join(",")}]`;
  if (typeof value === "object" && value !== null) {
    const entries = Object.entries(value)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${stableStringify(v)}`).join(",")}}`;
  }
  return JSON.stringify(value);
}
