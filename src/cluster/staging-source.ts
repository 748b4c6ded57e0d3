/** Where a definition's model files come from, for staging (the Hub, a local directory to push, or already on the nodes). */
import { basename } from "node:path";
import type { ClusterSpec, Settings } from "../spec/index.js";
import type { StagingSource } from "../staging/index.js";

export function stagingSourceOf(spec: ClusterSpec, settings: Settings, env: NodeJS.ProcessEnv = process.env): StagingSource {
  if (spec.model.source === "hub") {
    const token = env[settings.hub.tokenEnv];
    return { kind: "hub", endpoint: settings.hub.endpoint, repo: spec.model.id, revision: spec.model.revision, ...(token ? { token } : {}) };
  }
  if (spec.model.source === "push") {
    // Pushed models are cached under a repository name of their own: local/<directory name>.
    return { kind: "push", dir: spec.model.path ?? spec.model.id, repo: `local/${basename(spec.model.path ?? spec.model.id)}`, revision: spec.model.revision };
  }
  return { kind: "path", path: spec.model.path ?? spec.model.id };
}
