import { userInfo } from "node:os";
import { messageOf, ShardctlError } from "../errors/index.js";
import { cannotWriteIn, makeFolders } from "../files/index.js";
import { createRegistrar } from "../router/index.js";
import type { Settings } from "../spec/index.js";
import { guardStateDir } from "./guard-state-dir.js";

/**
 * The daemon writes its state directory (ledger, requests, launch records) and, with the router's
 * YAML as its registrar, that file's folder (the config is replaced by a rename, the relaunch marks
 * sit beside it). A folder it cannot write is refused as it starts, naming the setting, rather than
 * found by the first launch, which would start every process before failing to register.
 */
export async function checkWritableFolders(settings: Settings, settingsFile: string): Promise<void> {
  const user = daemonUser();
  const stateDir = settings.daemon.stateDir;
  const stateProblem = await makeFolders(stateDir).then(
    () => cannotWriteIn(stateDir),
    (error: unknown) => messageOf(error),
  );
  if (stateProblem !== undefined) {
    throw new ShardctlError(
      "StateDirUnwritable",
      `${settingsFile}: [daemon] state_dir ${stateDir} cannot be written by the daemon's user (${user}): ${stateProblem}; make that folder writable by ${user}, or set state_dir to a folder it owns`,
      { terminal: true },
    );
  }
  await guardStateDir(stateDir, settingsFile);
  // The registrar says which folders its registrations write in (none for an admin API).
  const unwritable = await createRegistrar(settings.router).unwritable?.();
  if (unwritable === undefined) return;
  const { folder, problem } = unwritable;
  throw new ShardctlError(
    "RouterConfigUnwritable",
    `${settingsFile}: [router] config ${settings.router.config}: the daemon's user (${user}) cannot create files in ${folder}: ${problem}; the daemon replaces that file by writing a new one beside it and renaming it over, so make ${folder} writable by ${user}, or point config at a file in a folder it owns`,
    { terminal: true },
  );
}

/** The user this process runs as, by name; by uid when the system has no name for it (a container's arbitrary uid, where userInfo throws). */
function daemonUser(): string {
  try {
    return userInfo().username;
  } catch {
    return `uid ${process.getuid?.() ?? "unknown"}`;
  }
}
