import { checkServiceValue } from "./check-value.js";
import type { ServiceLocation, ServiceSpec } from "./types.js";

/**
 * The environment file install creates when there is none (it never rewrites one: it is the
 * operator's, and holds the secrets): comments naming the variables the settings read, no value.
 * systemd's EnvironmentFile= and node's --env-file both read `NAME=value` lines and skip `#` lines.
 */
export function renderEnvFile(location: ServiceLocation, spec: ServiceSpec): string {
  const lines = [
    `# Environment of the shardctl daemon watching ${checkServiceValue("the watched directory", location.dir)} (${location.name}).`,
    "# NAME=value lines; keep this file mode 0600. `shardctl service install` created it and never rewrites it.",
    ...spec.secretEnv.map((secret) => `# ${secret.name}=   (${secret.setting})`),
  ];
  return `${lines.join("\n")}\n`;
}
