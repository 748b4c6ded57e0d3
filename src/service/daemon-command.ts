/** What every service runs, and the timings both service managers are given. */
import { dirname } from "node:path";
import type { ServiceLocation, ServiceSpec } from "./types.js";

/** Seconds between the daemon's failure and its restart: long enough not to spin on a broken settings file. */
export const restartDelaySeconds = 10;

/**
 * Seconds a stopping daemon gets, after SIGTERM, to finish the passes in flight (a launch waits
 * for its stages) before it alone is killed; the ledger lets the next daemon pick up what it left.
 */
export const stopTimeoutSeconds = 120;

/**
 * `shardctl daemon` on the watched directory with the settings file, both absolute. Never
 * `--teardown-on-exit`: a service stop or restart must leave the clusters running.
 */
export function daemonArguments(location: ServiceLocation, spec: ServiceSpec): string[] {
  return ["daemon", "--dir", location.dir, "--config", spec.settingsFile];
}

/** The daemon runs where its settings file is, so relative paths in it mean what they mean to `shardctl` run there. */
export function workingDirectoryOf(spec: ServiceSpec): string {
  return dirname(spec.settingsFile);
}

/**
 * The comment a service file carries about secrets: which variables the settings name (never their
 * values) and where the operator puts them — `where` is the file the service reads them from.
 */
export function secretsNote(spec: ServiceSpec, where: string): string {
  const named = spec.secretEnv.map((secret) => `${secret.name} (${secret.setting})`).join(", ");
  return named === ""
    ? `No secret is in this file; a variable the daemon needs goes as a NAME=value line in ${where} (mode 0600).`
    : `No secret is in this file. The settings name ${named}: the operator puts them as NAME=value lines in ${where} (mode 0600).`;
}
