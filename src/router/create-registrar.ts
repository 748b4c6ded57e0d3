/** Picks the registrar that `[router]` settings describe. */
import { ShardctlError } from "../errors/index.js";
import { createContinuumAdminRegistrar, type AdminPaths } from "./continuum-admin-registrar.js";
import { createContinuumFileRegistrar } from "./continuum-file-registrar.js";
import { createNoneRegistrar } from "./none-registrar.js";
import type { Registrar } from "./types.js";

export type RegistrarSettings = {
  kind: "continuum" | "none";
  /** Path of the router's YAML config; the default way to register (file edited in place). */
  config?: string;
  /** When set, register through continuum-router's admin API instead of the config file. */
  adminUrl?: string;
  /** Environment variable holding the admin API bearer token. */
  adminTokenEnv?: string;
  /** Admin API paths; defaults in DEFAULT_ADMIN_PATHS. */
  adminPaths?: Partial<AdminPaths>;
};

export function createRegistrar(settings: RegistrarSettings): Registrar {
  if (settings.kind === "none") return createNoneRegistrar();
  if (settings.adminUrl !== undefined) {
    return createContinuumAdminRegistrar({
      adminUrl: settings.adminUrl,
      adminTokenEnv: settings.adminTokenEnv,
      adminPaths: settings.adminPaths,
    });
  }
  if (settings.config === undefined) {
    throw new ShardctlError("RouterSettingsInvalid", 'router kind "continuum" needs `config` (the router\'s YAML file) or `admin_url`', {
      terminal: true,
    });
  }
  return createContinuumFileRegistrar(settings.config);
}
