/** The shapes of src/service: what a service runs, where its files go, and what install/uninstall/status found. */

/** The service manager kind: systemd (Linux) or launchd (macOS). */
export type ServicePlatform = "systemd" | "launchd";

/** The system's service manager (root, starts at boot) or the installing user's (starts at login, or at boot with lingering). */
export type ServiceDomain = "system" | "user";

/** An environment variable the settings name for a secret: its name, never its value. */
export interface SecretEnv {
  /** The variable, e.g. HF_TOKEN. */
  name: string;
  /** The setting that names it, as written in the settings file: `[hub] token_env`. */
  setting: string;
}

/** Where a service's files live and what it is called: depends only on the platform, the domain, the watched directory and the user. */
export interface ServiceLocation {
  platform: ServicePlatform;
  domain: ServiceDomain;
  /** Absolute watched directory, as given (not resolved through symlinks). */
  dir: string;
  /** Readable part of the name plus a hash of `dir`: `main-clusters-1a2b3c4d`. */
  slug: string;
  /** `shardctl-<slug>.service` (systemd) or `dev.shardctl.<slug>` (launchd label). */
  name: string;
  /** The unit or plist, where the service manager reads it. */
  file: string;
  /** The environment file the operator fills with the secrets; the unit only names it. */
  envFile: string;
  /** launchd: the daemon's stdout and stderr. systemd logs to the journal. */
  logFile?: string;
  /** launchd: `gui/<uid>` or `system`. */
  launchdDomain?: string;
}

/** Everything a rendered unit or plist depends on, so rendering is a pure function of it. */
export interface ServiceSpec {
  /** Absolute settings file given to `shardctl daemon --config`; its directory is the working directory. */
  settingsFile: string;
  /** Absolute node binary (process.execPath of the installing shardctl). */
  nodePath: string;
  /** Absolute path of the installed shardctl.js. */
  scriptPath: string;
  /** The daemon's PATH (it starts ssh, git and local engines by name). */
  path: string;
  /** System domain: the user the daemon runs as. Ignored in the user domain. */
  runAs?: string;
  /** The variables the settings name for secrets, listed in the file's comments and the hints. */
  secretEnv: readonly SecretEnv[];
}

/** One service-manager command; `mayFail` when failing means "already so" (booting out what is not loaded). */
export interface ManagerCommand {
  argv: readonly string[];
  mayFail?: boolean;
}

/** Whether the service manager can be asked, and why not. */
export type ManagerAvailability = { available: true } | { available: false; reason: string };
