/**
 * Asking systemd (systemctl) or launchd (launchctl) to load, unload and report a service, and
 * finding out first whether it can be asked at all: containers rarely run systemd, and Linux has no
 * launchd. Nothing here is asked when the files were staged under `--root`.
 */
import { access, constants } from "node:fs/promises";
import { delimiter, join } from "node:path";
import { execa } from "execa";
import { ShardctlError } from "../errors/index.js";
import { quoteArgv } from "../nodes/index.js";
import type { ManagerAvailability, ManagerCommand, ServiceDomain, ServiceLocation, ServicePlatform } from "./types.js";

/** How long one systemctl or launchctl call may take, ms (a restart waits for the old daemon to stop). */
const commandTimeoutMs = 180_000;

function systemctl(location: ServiceLocation, ...args: string[]): string[] {
  return location.domain === "user" ? ["systemctl", "--user", ...args] : ["systemctl", ...args];
}

/**
 * What loads (or reloads, on an upgrade) the installed file and starts the daemon. systemd: enable,
 * then restart rather than `enable --now`, so that a running daemon picks up a rewritten unit (it
 * leaves the clusters running and the next one adopts them). launchd: boot out what runs (nothing,
 * the first time), enable (in case it was disabled), bootstrap.
 */
export function loadCommands(location: ServiceLocation): ManagerCommand[] {
  if (location.platform === "systemd") {
    return [
      { argv: systemctl(location, "daemon-reload") },
      { argv: systemctl(location, "enable", location.name) },
      { argv: systemctl(location, "restart", location.name) },
    ];
  }
  const target = `${location.launchdDomain}/${location.name}`;
  return [
    { argv: ["launchctl", "bootout", target], mayFail: true },
    { argv: ["launchctl", "enable", target] },
    { argv: ["launchctl", "bootstrap", location.launchdDomain!, location.file] },
  ];
}

/** What stops and disables the service before its file is removed. */
export function unloadCommands(location: ServiceLocation): ManagerCommand[] {
  if (location.platform === "systemd") return [{ argv: systemctl(location, "disable", "--now", location.name) }];
  return [{ argv: ["launchctl", "bootout", `${location.launchdDomain}/${location.name}`], mayFail: true }];
}

/** What makes the service manager forget the removed file. */
export function afterRemoveCommands(location: ServiceLocation): ManagerCommand[] {
  if (location.platform === "systemd")
    return [{ argv: systemctl(location, "daemon-reload") }, { argv: systemctl(location, "reset-failed", location.name), mayFail: true }];
  return [];
}

/** The commands as lines a person can paste into a shell. */
export function formatCommands(commands: readonly ManagerCommand[]): string[] {
  return commands.map((command) => quoteArgv([...command.argv]) + (command.mayFail === true ? "   # may fail: nothing to stop" : ""));
}

/** Whether the service manager of `platform` runs here and can be asked, with the reason when not. */
export async function detectServiceManager(platform: ServicePlatform, domain: ServiceDomain, env: NodeJS.ProcessEnv = process.env): Promise<ManagerAvailability> {
  if (platform === "launchd") {
    return (await findExecutable("launchctl", env)) === undefined
      ? { available: false, reason: "launchctl is not on PATH (launchd is macOS's service manager)" }
      : { available: true };
  }
  if ((await findExecutable("systemctl", env)) === undefined) return { available: false, reason: "systemctl is not on PATH" };
  // sd_booted(3): systemd runs as the init system exactly when this directory exists.
  if (!(await isReadable("/run/systemd/system"))) {
    return { available: false, reason: "systemd is not the init system here (/run/systemd/system is missing, as in most containers)" };
  }
  if (domain === "user") {
    const probe = await execa("systemctl", ["--user", "show-environment"], { reject: false, timeout: 10_000, env, extendEnv: false });
    if (probe.exitCode !== 0) {
      const why = String(probe.stderr).split("\n")[0] || `exit ${probe.exitCode}`;
      return { available: false, reason: `your systemd user manager cannot be reached (systemctl --user: ${why})` };
    }
  }
  return { available: true };
}

/** Whether this service's manager may be asked: never for files staged under `root`, else when it runs here. */
export async function serviceManagerFor(location: ServiceLocation, root: string | undefined): Promise<ManagerAvailability> {
  if (root !== undefined) return { available: false, reason: `the files are staged under ${root} (--root): no service manager was asked` };
  const manager = await detectServiceManager(location.platform, location.domain);
  return manager.available ? manager : { available: false, reason: `no service manager: ${manager.reason}` };
}

/** Runs the commands in order; the first that fails (and may not) stops the rest with its output. */
export async function runManagerCommands(commands: readonly ManagerCommand[]): Promise<void> {
  for (const command of commands) {
    const [file, ...args] = command.argv;
    const result = await execa(file!, args, { reject: false, timeout: commandTimeoutMs, all: true });
    if (result.exitCode === 0 || command.mayFail === true) continue;
    const output = String(result.all ?? "").trim();
    throw new ShardctlError(
      "ServiceManagerFailed",
      `\`${quoteArgv([...command.argv])}\` failed (${result.exitCode ?? result.signal ?? "no exit code"})${output === "" ? "" : `: ${output}`}`,
    );
  }
}

/** The service's state as its manager reports it; `active` when the daemon runs. */
export async function queryServiceState(location: ServiceLocation): Promise<{ active: boolean; description: string }> {
  if (location.platform === "systemd") {
    const [file, ...args] = systemctl(location, "is-active", location.name);
    const active = await execa(file!, args, { reject: false, timeout: 10_000 });
    const [file2, ...args2] = systemctl(location, "is-enabled", location.name);
    const enabled = await execa(file2!, args2, { reject: false, timeout: 10_000 });
    const state = String(active.stdout).trim() || "unknown";
    return { active: state === "active", description: `${state}, ${String(enabled.stdout).trim() || "not enabled"}` };
  }
  const printed = await execa("launchctl", ["print", `${location.launchdDomain}/${location.name}`], { reject: false, timeout: 10_000 });
  if (printed.exitCode !== 0) return { active: false, description: "not loaded" };
  const state = /^\s*state = (.+)$/m.exec(String(printed.stdout))?.[1]?.trim() ?? "unknown";
  return { active: state === "running", description: `loaded, ${state}` };
}

async function findExecutable(name: string, env: NodeJS.ProcessEnv): Promise<string | undefined> {
  for (const dir of (env.PATH ?? "").split(delimiter)) {
    if (dir === "") continue;
    const candidate = join(dir, name);
    if (
      await access(candidate, constants.X_OK).then(
        () => true,
        () => false,
      )
    )
      return candidate;
  }
  return undefined;
}

async function isReadable(path: string): Promise<boolean> {
  return access(path).then(
    () => true,
    () => false,
  );
}
