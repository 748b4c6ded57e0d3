/**
 * `shardctl service install|uninstall|status [--user]`: the daemon for one directory as a service
 * of the platform's service manager — a systemd unit on Linux, a launchd plist on macOS — that
 * restarts it on failure, logs where the platform keeps logs, and carries no secret.
 */
import { stat } from "node:fs/promises";
import { homedir, userInfo } from "node:os";
import { dirname, isAbsolute, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { ShardctlError } from "../../errors/index.js";
import {
  defaultRunAs,
  formatCommands,
  installService,
  loadCommands,
  locateService,
  platformOf,
  readServiceStatus,
  renderEnvFile,
  renderServiceFile,
  secretEnvOf,
  servicePathEnv,
  uninstallService,
  unloadCommands,
  afterRemoveCommands,
  type ServiceDomain,
  type ServiceLocation,
  type ServicePlatform,
  type ServiceSpec,
} from "../../service/index.js";
import { loadContext } from "../context.js";
import { usageOf } from "../help/index.js";
import { UsageError } from "../usage-error.js";

/** Exit code of install and uninstall when the file was written or removed but no service manager was asked. */
export const notLoadedExitCode = 3;

const usage = usageOf("service");

const actions = ["install", "uninstall", "status"] as const;
type Action = (typeof actions)[number];

export async function run(args: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: {
      config: { type: "string" },
      dir: { type: "string" },
      user: { type: "boolean" },
      platform: { type: "string" },
      "run-as": { type: "string" },
      "dry-run": { type: "boolean" },
      force: { type: "boolean" },
      root: { type: "string" },
    },
  });
  const action = positionals[0] as Action | undefined;
  if (positionals.length !== 1 || !actions.includes(action!)) throw new UsageError(usage);
  const domain: ServiceDomain = values.user === true ? "user" : "system";
  if (domain === "user" && values["run-as"] !== undefined) throw new UsageError("--run-as is for system services: a --user service runs as you");
  if (action === "status" && values["dry-run"] === true) throw new UsageError("--dry-run is for install and uninstall");
  const platform = platformFrom(values.platform);
  const root = values.root === undefined ? undefined : resolve(values.root);

  // The watched directory as `shardctl daemon` finds it: --dir, else clusters/ beside the settings.
  const settingsFile = resolve(values.config ?? "shardctl.toml");
  const dir = resolve(values.dir ?? join(dirname(settingsFile), "clusters"));
  const configHome = process.env.XDG_CONFIG_HOME;
  const location = locateService({
    platform,
    domain,
    dir,
    home: homedir(),
    ...(configHome !== undefined && isAbsolute(configHome) ? { configHome } : {}),
    uid: process.getuid?.() ?? 0,
  });

  if (action === "status") return await status(location, root);
  if (action === "uninstall") return await uninstall(location, { root, force: values.force === true, dryRun: values["dry-run"] === true });

  // Install checks what the daemon would refuse at start, so the service does not crash-loop on it.
  const context = await loadContext({ config: settingsFile, dir });
  const isDirectory = await stat(dir).then(
    (info) => info.isDirectory(),
    () => false,
  );
  if (!isDirectory) throw new UsageError(`${dir}: no such directory of cluster definitions; create it or pass --dir <dir>`);
  const scriptPath = fileURLToPath(new URL("../shardctl.js", import.meta.url));
  const spec: ServiceSpec = {
    settingsFile,
    nodePath: process.execPath,
    scriptPath,
    path: servicePathEnv(process.execPath, process.env.PATH),
    ...(domain === "system" ? { runAs: values["run-as"] ?? defaultRunAs() } : {}),
    secretEnv: secretEnvOf(context.settings),
  };
  return await install(location, spec, { root, force: values.force === true, dryRun: values["dry-run"] === true });
}

function platformFrom(value: string | undefined): ServicePlatform {
  if (value === "systemd" || value === "launchd") return value;
  if (value !== undefined) throw new UsageError(`expected --platform to be systemd or launchd, got "${value}"`);
  const platform = platformOf();
  if (platform === undefined) {
    throw new ShardctlError(
      "ServicePlatformUnsupported",
      `no service manager shardctl knows runs on ${process.platform}; pass --platform systemd|launchd to write a file anyway`,
      {
        terminal: true,
      },
    );
  }
  return platform;
}

interface Options {
  root: string | undefined;
  force: boolean;
  dryRun: boolean;
}

async function install(location: ServiceLocation, spec: ServiceSpec, options: Options): Promise<number> {
  if (options.dryRun) {
    console.log(`# ${location.file} (mode 0644)`);
    process.stdout.write(renderServiceFile(location, spec));
    console.log(`\n# ${location.envFile} (mode 0600; created only when missing, never rewritten)`);
    process.stdout.write(renderEnvFile(location, spec));
    console.log("\n# then:");
    for (const line of formatCommands(loadCommands(location))) console.log(line);
    return 0;
  }
  const result = await installService(location, spec, { ...(options.root === undefined ? {} : { root: options.root }), force: options.force });
  console.log(`${result.replaced === "absent" ? "wrote" : "rewrote"} ${result.file}`);
  console.log(
    result.envFile.created
      ? `created ${result.envFile.path} (mode 0600): the secrets go there`
      : `kept ${result.envFile.path}: it is yours and install never rewrites it`,
  );
  if ((result.envFile.mode & 0o077) !== 0) {
    console.error(`warning: ${result.envFile.path} is readable by others (mode ${result.envFile.mode.toString(8)}): chmod 600 ${result.envFile.path}`);
  }
  for (const line of hints(location, spec)) console.log(line);
  if (result.loaded === true) {
    console.log(`loaded: ${location.name} is enabled and (re)started`);
    return 0;
  }
  console.error(`not loaded: ${result.loaded.reason}`);
  console.error(`to load it where ${location.platform} runs:`);
  for (const line of formatCommands(loadCommands(location))) console.error(`  ${line}`);
  return notLoadedExitCode;
}

/** What the operator needs to know next: where the logs are, where the secrets go, lingering. */
function hints(location: ServiceLocation, spec: ServiceSpec): string[] {
  const user = location.domain === "user";
  const lines = [
    location.platform === "systemd" ? `logs: journalctl ${user ? "--user-unit" : "-u"} ${location.name} -f` : `logs: tail -f ${JSON.stringify(location.logFile)}`,
  ];
  if (spec.secretEnv.length > 0) {
    const restart =
      location.platform === "systemd"
        ? `systemctl${user ? " --user" : ""} restart ${location.name}`
        : `launchctl kickstart -k ${location.launchdDomain}/${location.name}`;
    const inShell = spec.secretEnv.filter((secret) => process.env[secret.name] !== undefined).map((secret) => secret.name);
    lines.push(
      `secrets: the settings name ${spec.secretEnv.map((secret) => `${secret.name} (${secret.setting})`).join(", ")}; the service file holds none of them.`,
      `  Put NAME=value lines in ${location.envFile} (mode 0600), then: ${restart}`,
      ...(inShell.length > 0 ? [`  ${inShell.join(", ")} ${inShell.length === 1 ? "is" : "are"} set in this shell: not copied.`] : []),
    );
  }
  if (location.platform === "systemd" && user) {
    lines.push(`a user service runs while you are logged in; to start it at boot and keep it after you log out: loginctl enable-linger ${userInfo().username}`);
  }
  if (location.platform === "launchd") lines.push(`keep ${location.envFile}: node refuses to start the daemon without it (an empty one will do)`);
  if (!user) lines.push(`runs as: ${spec.runAs ?? "root"}`);
  return lines;
}

async function uninstall(location: ServiceLocation, options: Options): Promise<number> {
  if (options.dryRun) {
    console.log(`# would run:`);
    for (const line of formatCommands(unloadCommands(location))) console.log(line);
    console.log(`rm ${JSON.stringify(location.file)}`);
    for (const line of formatCommands(afterRemoveCommands(location))) console.log(line);
    return 0;
  }
  const result = await uninstallService(location, { ...(options.root === undefined ? {} : { root: options.root }), force: options.force });
  if (!result.removed) console.log(`not installed: nothing at ${result.file}`);
  else console.log(`removed ${result.file}`);
  if (result.envFileLeft !== undefined) console.log(`kept ${result.envFileLeft}: it holds the secrets; remove it when you no longer need them`);
  if (!result.removed) return 0;
  if (result.unloaded === true) {
    console.log(`stopped and disabled ${location.name}; the clusters keep running`);
    return 0;
  }
  console.error(`not unloaded: ${result.unloaded.reason}`);
  console.error(`to stop it where ${location.platform} runs:`);
  for (const line of formatCommands([...unloadCommands(location), ...afterRemoveCommands(location)])) console.error(`  ${line}`);
  return notLoadedExitCode;
}

async function status(location: ServiceLocation, root: string | undefined): Promise<number> {
  const found = await readServiceStatus(location, root === undefined ? {} : { root });
  console.log(`service   ${location.name} (${location.platform}, ${location.domain})`);
  console.log(`watches   ${location.dir}`);
  const installed = { ours: "installed", absent: "not installed", foreign: "present, but not written by shardctl" }[found.installed];
  console.log(`file      ${found.file}: ${installed}`);
  const envMissing = location.platform === "launchd" ? "missing: node refuses to start the daemon without it; rerun install" : "missing (optional)";
  console.log(`env file  ${found.envFile.path}: ${found.envFile.mode === undefined ? envMissing : `mode ${found.envFile.mode.toString(8)}`}`);
  if (location.platform === "systemd") console.log(`logs      journalctl ${location.domain === "user" ? "--user-unit" : "-u"} ${location.name}`);
  else console.log(`logs      ${location.logFile}`);
  if (found.state === undefined) return 4;
  if ("unknown" in found.state) {
    console.log(`state     unknown: ${found.state.unknown}`);
    return 3;
  }
  console.log(`state     ${found.state.description}`);
  return found.state.active ? 0 : 2;
}
