import { rm, stat } from "node:fs/promises";
import { refuseForeignFile } from "./existing-file.js";
import { placed } from "./locate-service.js";
import { afterRemoveCommands, runManagerCommands, serviceManagerFor, unloadCommands } from "./service-manager.js";
import type { ServiceLocation } from "./types.js";

export interface UninstallOptions {
  /** The files were staged under this directory; no service manager is asked. Default: none. */
  root?: string;
  /** Remove a file at the service's path that shardctl did not write. Default false. */
  force?: boolean;
}

export interface UninstallResult {
  file: string;
  /** False when there was nothing to remove. */
  removed: boolean;
  /** true once the service manager stopped and disabled it; otherwise why it was not asked. */
  unloaded: true | { reason: string };
  /** The operator's environment file, left in place (it holds the secrets), when it exists. */
  envFileLeft?: string;
}

/**
 * Stops and disables the service, removes its unit or plist and makes the service manager forget
 * it. Stopping the daemon leaves the clusters running, as a daemon stop always does. The environment
 * file is the operator's and stays.
 */
export async function uninstallService(location: ServiceLocation, options: UninstallOptions = {}): Promise<UninstallResult> {
  const file = placed(location.file, options.root);
  const envPath = placed(location.envFile, options.root);
  const envFileLeft = (await stat(envPath).then(
    () => true,
    () => false,
  ))
    ? envPath
    : undefined;
  const found = await refuseForeignFile(file, options.force ?? false, "remove");
  if (found === "absent") return { file, removed: false, unloaded: true, ...(envFileLeft === undefined ? {} : { envFileLeft }) };

  const manager = await serviceManagerFor(location, options.root);
  if (manager.available) await runManagerCommands(unloadCommands(location));
  await rm(file, { force: true });
  if (manager.available) await runManagerCommands(afterRemoveCommands(location));
  return { file, removed: true, unloaded: manager.available ? true : { reason: manager.reason }, ...(envFileLeft === undefined ? {} : { envFileLeft }) };
}
