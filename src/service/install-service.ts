import { chmod, chown, mkdir, stat, writeFile } from "node:fs/promises";
import { dirname } from "node:path";
import { execa } from "execa";
import { ShardctlError } from "../errors/index.js";
import { writeFileAtomic } from "../files/index.js";
import { refuseForeignFile, type ExistingFile } from "./existing-file.js";
import { placed } from "./locate-service.js";
import { renderEnvFile } from "./render-env-file.js";
import { renderServiceFile } from "./render-service-file.js";
import { loadCommands, runManagerCommands, serviceManagerFor } from "./service-manager.js";
import type { ServiceLocation, ServiceSpec } from "./types.js";

export interface InstallOptions {
  /** Write the files under this directory and ask no service manager (packaging, tests). Default: none. */
  root?: string;
  /** Replace a file at the service's path that shardctl did not write. Default false. */
  force?: boolean;
}

export interface InstallResult {
  /** The unit or plist as written (under the root when there is one). */
  file: string;
  /** What was at that path before. */
  replaced: ExistingFile;
  envFile: {
    path: string;
    /** False when the operator's file was there already (it is never rewritten). */
    created: boolean;
    /** Its permission bits, to warn when others may read it. */
    mode: number;
  };
  /** true once the service manager loaded and started it; otherwise why it was not asked. */
  loaded: true | { reason: string };
}

/**
 * Writes the unit or plist (mode 0644), creates the environment file if it is missing (0600, only
 * comments), and asks the service manager to load and start the daemon. Values are checked while
 * rendering, before anything is written. When the service manager cannot be asked the files stay
 * written and the result says why, so the caller can say what to run.
 */
export async function installService(location: ServiceLocation, spec: ServiceSpec, options: InstallOptions = {}): Promise<InstallResult> {
  const text = renderServiceFile(location, spec);
  const envText = renderEnvFile(location, spec);
  const file = placed(location.file, options.root);
  const replaced = await refuseForeignFile(file, options.force ?? false, "replace");
  // launchd runs the system daemon as UserName, and node (as that user) reads the environment file:
  // it and the log directory belong to that user. systemd reads EnvironmentFile= as root.
  const owner =
    location.platform === "launchd" && location.domain === "system" && spec.runAs !== undefined && process.getuid?.() === 0 ? await idsOf(spec.runAs) : undefined;

  await mkdir(dirname(file), { recursive: true });
  await writeFileAtomic(file, text);
  // writeFileAtomic keeps an existing file's mode; a service file is world-readable and root-writable.
  await chmod(file, 0o644);

  const envPath = placed(location.envFile, options.root);
  await mkdir(dirname(envPath), { recursive: true });
  const created = await writeFile(envPath, envText, { mode: 0o600, flag: "wx" }).then(
    () => true,
    (error: NodeJS.ErrnoException) => {
      if (error.code === "EEXIST") return false;
      throw error;
    },
  );
  if (created) {
    await chmod(envPath, 0o600);
    if (owner !== undefined) await chown(envPath, owner.uid, owner.gid);
  }
  const envMode = (await stat(envPath)).mode & 0o777;

  if (location.logFile !== undefined) {
    const logDir = placed(dirname(location.logFile), options.root);
    await mkdir(logDir, { recursive: true });
    if (owner !== undefined) await chown(logDir, owner.uid, owner.gid);
  }

  const manager = await serviceManagerFor(location, options.root);
  if (manager.available) await runManagerCommands(loadCommands(location));
  return { file, replaced, envFile: { path: envPath, created, mode: envMode }, loaded: manager.available ? true : { reason: manager.reason } };
}

async function idsOf(user: string): Promise<{ uid: number; gid: number }> {
  const [uid, gid] = await Promise.all(["-u", "-g"].map((flag) => execa("id", [flag, user], { reject: false })));
  if (uid!.exitCode !== 0 || gid!.exitCode !== 0) {
    throw new ShardctlError("ServiceUserUnknown", `--run-as ${user}: no such user on this machine (id ${user}: ${String(uid!.stderr).trim()})`, { terminal: true });
  }
  return { uid: Number(String(uid!.stdout).trim()), gid: Number(String(gid!.stdout).trim()) };
}
