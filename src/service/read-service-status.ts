import { stat } from "node:fs/promises";
import { existingFile, type ExistingFile } from "./existing-file.js";
import { placed } from "./locate-service.js";
import { queryServiceState, serviceManagerFor } from "./service-manager.js";
import type { ServiceLocation } from "./types.js";

export interface ServiceStatus {
  file: string;
  installed: ExistingFile;
  /** What the service manager says, or why it could not be asked. Absent when nothing is installed. */
  state?: { active: boolean; description: string } | { unknown: string };
  envFile: { path: string; mode?: number };
}

/** Whether the service's file exists and is shardctl's, and what its service manager says of it. */
export async function readServiceStatus(location: ServiceLocation, options: { root?: string } = {}): Promise<ServiceStatus> {
  const file = placed(location.file, options.root);
  const envPath = placed(location.envFile, options.root);
  const envMode = await stat(envPath).then(
    (info) => info.mode & 0o777,
    () => undefined,
  );
  const envFile = envMode === undefined ? { path: envPath } : { path: envPath, mode: envMode };
  const installed = await existingFile(file);
  if (installed !== "ours") return { file, installed, envFile };
  const manager = await serviceManagerFor(location, options.root);
  const state = manager.available ? await queryServiceState(location) : { unknown: manager.reason };
  return { file, installed, state, envFile };
}
