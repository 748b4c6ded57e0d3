/**
 * A cluster's run folder on a node (its launch files, token, logs) is named by the cluster alone
 * (`<model_dir>/.shardctl/run/<cluster>`), so two daemons with separate state directories that each
 * define a cluster of the same name on a shared node would share it: each launch would stop the
 * other's engines as leftovers of its own and write its files over the other's. A launch therefore
 * claims the folder (`claim.json`: which daemon) and does not take one another daemon claimed while
 * that daemon's engines run from it (RunFolderClaimed, retried with back-off); a claim whose
 * engines are all gone is taken over. Teardowns and prunes leave a folder claimed by another
 * daemon as they find it.
 */
import { posix } from "node:path";
import { showText } from "../errors/index.js";
import { within, type NodeAccess } from "../nodes/index.js";
import { LaunchError } from "./launch-error.js";
import { defaultReachMs } from "./processes.js";

/** Which daemon launched from a run folder. */
export interface RunClaim {
  /** The control machine's host name. */
  host: string;
  /** The daemon's state directory (absolute): with the host, it tells one daemon from another. */
  stateDir: string;
  /** Its definitions directory, to name the daemon in messages. */
  definitions: string;
}

/** A run folder on a node. */
export interface RunFolder {
  node: NodeAccess;
  nodeName: string;
  runDir: string;
}

const claimFileName = "claim.json";

/**
 * A claim this recent, ms (10 min), is not taken over even with nothing running from its folder: its
 * daemon's launch may be between its claim and its first process (writing files, choosing ports).
 */
const claimFreshMs = 10 * 60_000;

/** A claim as stored: the daemon, and when it claimed (its clock, ISO 8601). */
interface StoredClaim extends RunClaim {
  at?: string;
}

/** The same daemon: the same host and state directory (its definitions directory may have moved). */
export function isSameDaemon(a: RunClaim, b: RunClaim): boolean {
  return a.host === b.host && a.stateDir === b.stateDir;
}

/**
 * The claim another daemon holds on `runDir`, or undefined when the folder is unclaimed, claimed by
 * `me`, unreadable, or the node does not answer within `defaultReachMs` (a silent node fails the
 * step that needs it; a folder launched by a version that did not claim folders is this daemon's
 * as it always was).
 */
export async function claimedElsewhere(node: NodeAccess, runDir: string, me: RunClaim): Promise<StoredClaim | undefined> {
  const claim = await within(defaultReachMs, readClaim(node, runDir), undefined);
  return claim === undefined || isSameDaemon(claim, me) ? undefined : claim;
}

/**
 * Claim each run folder for `me` before a launch touches it. One another daemon claimed is taken
 * over only when nothing runs from it and its claim is not fresh (said with `say`); otherwise the
 * launch fails with RunFolderClaimed, naming that daemon and what to do.
 */
export async function claimRunFolders(folders: readonly RunFolder[], me: RunClaim, say: (step: string, detail: string) => void): Promise<void> {
  await Promise.all(
    folders.map(async ({ node, nodeName, runDir }) => {
      const other = await claimedElsewhere(node, runDir, me);
      if (other !== undefined) {
        const running = await processesRunningFrom(node, runDir);
        const claimedMs = other.at === undefined ? Number.NaN : Date.now() - Date.parse(other.at);
        const fresh = claimedMs >= -claimFreshMs && claimedMs < claimFreshMs;
        if (running === undefined || running.length > 0 || fresh) {
          const runs =
            running === undefined
              ? "whose cluster of the same name may run from it (the node did not list its processes in time)"
              : running.length > 0
                ? `whose cluster of the same name runs from it (pids ${running.join(", ")})`
                : `whose launch of a cluster of the same name claimed it ${Math.max(0, Math.round(claimedMs / 1000))} s ago and may be starting (a claim is taken over once nothing runs from it for ${claimFreshMs / 60_000} min)`;
          throw new LaunchError(
            "RunFolderClaimed",
            "claim-run-folder",
            `the run folder ${runDir} on ${nodeName} belongs to another shardctl daemon (host ${showText(other.host)}, state_dir ${showText(other.stateDir)}, definitions ${showText(other.definitions)}) ${runs}: rename one of the two clusters, or give the node another model_dir in one daemon's settings; if that daemon is gone for good, stop what it left running there. Nothing of the other cluster was touched; retried with back-off`,
          );
        }
        say(
          "run-folder-taken-over",
          `${runDir} on ${nodeName} was claimed by another daemon (host ${showText(other.host)}, state_dir ${showText(other.stateDir)}), but nothing runs from it: this daemon takes it`,
        );
      }
      await within(defaultReachMs, writeClaim(node, runDir, me), undefined);
    }),
  );
}

async function readClaim(node: NodeAccess, runDir: string): Promise<StoredClaim | undefined> {
  let text: string;
  try {
    text = (await node.readFile(posix.join(runDir, claimFileName))).toString("utf8");
  } catch {
    return undefined;
  }
  try {
    const parsed = JSON.parse(text) as Partial<StoredClaim>;
    if (typeof parsed.host !== "string" || typeof parsed.stateDir !== "string") return undefined;
    return {
      host: parsed.host,
      stateDir: parsed.stateDir,
      definitions: typeof parsed.definitions === "string" ? parsed.definitions : "",
      ...(typeof parsed.at === "string" ? { at: parsed.at } : {}),
    };
  } catch {
    return undefined;
  }
}

async function writeClaim(node: NodeAccess, runDir: string, me: RunClaim): Promise<void> {
  try {
    await node.mkdir(runDir);
    const claim: StoredClaim = { ...me, at: new Date().toISOString() };
    await node.writeFile(posix.join(runDir, claimFileName), `${JSON.stringify(claim)}\n`);
  } catch {
    // The launch files, written next, fail with the node's own words where the folder is unwritable.
  }
}

/**
 * Pids of the processes on `node` started from `runDir` by a launch: an engine handed the launch's
 * cluster config or hostfile, or the `sh` that runs an engine and writes its exit status there.
 * Someone reading a log there is not one. Undefined when the node did not answer in time: a
 * folder is never taken on a guess.
 */
async function processesRunningFrom(node: NodeAccess, runDir: string): Promise<string[] | undefined> {
  const dir = runDir.replace(/\/+$/, "");
  const result = await node.run(["ps", "-A", "-ww", "-o", "pid=", "-o", "args="], { deadlineMs: defaultReachMs }).catch(() => undefined);
  if (result === undefined || result.exitCode !== 0) return undefined;
  const launchFiles = [`${dir}/cluster.toml`, `${dir}/hostfile.json`];
  const wrapper = new RegExp(`^(sh -c|env ).* ${escapeRegExp(dir)}/[^ /]+\\.exit( |$)`);
  const pids: string[] = [];
  for (const line of result.stdout.split("\n")) {
    const match = /^\s*(\d+)\s+(.*)$/.exec(line);
    if (match === null) continue;
    const args = match[2]!;
    if (launchFiles.some((file) => args.includes(file)) || wrapper.test(args)) pids.push(match[1]!);
  }
  return pids;
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}
