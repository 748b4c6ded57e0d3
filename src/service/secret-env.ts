import type { Settings } from "../spec/index.js";
import type { SecretEnv } from "./types.js";

/**
 * The environment variables the settings name for secrets: every setting whose key ends in `_env`
 * (`[hub] token_env`, `[router] admin_token_env`, …) names one, so a setting added later is listed
 * too. Only the names: a value never reaches a service file.
 */
export function secretEnvOf(settings: Settings): SecretEnv[] {
  const found: SecretEnv[] = [];
  for (const [section, table] of Object.entries(settings)) {
    if (typeof table !== "object" || table === null || section === "nodes") continue;
    for (const [key, value] of Object.entries(table as Record<string, unknown>)) {
      if (!key.endsWith("Env") || typeof value !== "string") continue;
      if (found.some((secret) => secret.name === value)) continue;
      found.push({ name: value, setting: `[${section}] ${key.replace(/[A-Z]/g, (letter) => `_${letter.toLowerCase()}`)}` });
    }
  }
  return found;
}
