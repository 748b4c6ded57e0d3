import { userInfo } from "node:os";
import { delimiter, dirname, isAbsolute } from "node:path";
import { hasControlCharacter } from "./check-value.js";

/** PATH when the installing shell has none worth keeping. */
const fallbackPath = ["/usr/local/bin", "/usr/bin", "/bin"];

/**
 * The daemon's PATH: node's own directory first (an engine that finds node on the PATH, as
 * shard-engine run as a program does, finds the node that runs the daemon), then the installing
 * shell's entries, so the service finds the ssh, git and engine binaries the operator tried by
 * hand. Relative entries are dropped: they would resolve against the service's working directory.
 */
export function servicePathEnv(nodePath: string, installerPath: string | undefined): string {
  const entries = (installerPath ?? "").split(delimiter).filter((entry) => isAbsolute(entry) && !hasControlCharacter(entry));
  return [...new Set([dirname(nodePath), ...(entries.length > 0 ? entries : fallbackPath)])].join(delimiter);
}

/** Whom a system service runs as by default: the person behind sudo, else whoever installs it. */
export function defaultRunAs(env: NodeJS.ProcessEnv = process.env): string {
  return env.SUDO_USER !== undefined && env.SUDO_USER !== "" ? env.SUDO_USER : userInfo().username;
}

/** The service manager kind of this operating system, if it has one shardctl knows. */
export function platformOf(os: NodeJS.Platform = process.platform): "systemd" | "launchd" | undefined {
  if (os === "linux") return "systemd";
  if (os === "darwin") return "launchd";
  return undefined;
}
