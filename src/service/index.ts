/**
 * src/service: running the daemon under the platform's service manager — a systemd unit (Linux) or
 * a launchd plist (macOS) per watched directory — rendered from plain inputs, installed, removed and
 * reported. Secrets never reach these files: they name an environment file the operator fills.
 */
export type { ManagerAvailability, ManagerCommand, SecretEnv, ServiceDomain, ServiceLocation, ServicePlatform, ServiceSpec } from "./types.js";
export { serviceSlug, serviceName } from "./service-name.js";
export { locateService, placed, type LocateOptions } from "./locate-service.js";
export { renderSystemdUnit } from "./render-systemd-unit.js";
export { renderLaunchdPlist } from "./render-launchd-plist.js";
export { renderServiceFile } from "./render-service-file.js";
export { renderEnvFile } from "./render-env-file.js";
export { quoteExecWord, quoteEnvironment, escapeSystemdLine } from "./systemd-quote.js";
export { escapeXml } from "./xml-escape.js";
export { serviceMarker, isShardctlServiceFile } from "./marker.js";
export { secretEnvOf } from "./secret-env.js";
export { servicePathEnv, defaultRunAs, platformOf } from "./service-environment.js";
export { daemonArguments, restartDelaySeconds, stopTimeoutSeconds } from "./daemon-command.js";
export { detectServiceManager, serviceManagerFor, loadCommands, unloadCommands, afterRemoveCommands, formatCommands } from "./service-manager.js";
export { installService, type InstallOptions, type InstallResult } from "./install-service.js";
export { uninstallService, type UninstallOptions, type UninstallResult } from "./uninstall-service.js";
export { readServiceStatus, type ServiceStatus } from "./read-service-status.js";
export type { ExistingFile } from "./existing-file.js";
