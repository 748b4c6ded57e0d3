import { join } from "node:path";
import { serviceName, serviceSlug } from "./service-name.js";
import type { ServiceDomain, ServiceLocation, ServicePlatform } from "./types.js";

export interface LocateOptions {
  platform: ServicePlatform;
  domain: ServiceDomain;
  /** Absolute watched directory. */
  dir: string;
  /** Home directory of the installing user: the user domain's files live under it. */
  home: string;
  /** $XDG_CONFIG_HOME when set; default `<home>/.config`. systemd's user manager reads units from it. */
  configHome?: string;
  /** The installing user's uid: launchd's user domain is `gui/<uid>`. */
  uid: number;
}

/**
 * Where the platform's service manager expects the unit or plist, the environment file beside the
 * other configuration (`/etc/shardctl` for the system, `~/.config/shardctl` for a user), and on
 * launchd the log file under the Logs directory Console.app shows.
 */
export function locateService(options: LocateOptions): ServiceLocation {
  const { platform, domain, dir, home } = options;
  const slug = serviceSlug(dir);
  const name = serviceName(platform, slug);
  const configHome = options.configHome ?? join(home, ".config");
  const envFile = domain === "system" ? join("/etc/shardctl", `${slug}.env`) : join(configHome, "shardctl", `${slug}.env`);
  if (platform === "systemd") {
    const unitDir = domain === "system" ? "/etc/systemd/system" : join(configHome, "systemd", "user");
    return { platform, domain, dir, slug, name, file: join(unitDir, name), envFile };
  }
  const plistDir = domain === "system" ? "/Library/LaunchDaemons" : join(home, "Library", "LaunchAgents");
  const logDir = domain === "system" ? "/Library/Logs/shardctl" : join(home, "Library", "Logs", "shardctl");
  return {
    platform,
    domain,
    dir,
    slug,
    name,
    file: join(plistDir, `${name}.plist`),
    envFile,
    logFile: join(logDir, `${name}.log`),
    launchdDomain: domain === "system" ? "system" : `gui/${options.uid}`,
  };
}

/** `path` as written under `root` (packaging and tests stage the files there), or `path` itself. */
export function placed(path: string, root: string | undefined): string {
  return root === undefined ? path : join(root, path);
}
