/**
 * A cluster's run folder on a node (its launch files, token, logs) is named by the cluster alone
 * (`<model_dir>/.shardctl/run/<cluster>`), so two daemons with separate state directories that each
 * define a cluster of the same name on a shared node would share it: each launch would stop the
 * other's engines as leftovers of its own and write its files over the other's. A launch therefore
 * claims the folder (`claim.json`: which daemon, since when) and does not take one another daemon
 * claimed while that daemon's engines run from it, or while its claim is fresh (RunFolderClaimed,
 * retried with back-off); a claim whose engines are gone is taken over once it is 10 minutes old.
 * A claim that cannot be read (a silent node) is never taken for none. Teardowns renew their
 * daemon's claim (a relaunch follows within the back-off) and, like prunes, leave a folder claimed
 * by another daemon as they find it.
 */
import { posix } from "node:path";
import { showText } from "../errors/index.js";
import { within, type NodeAccess } from "../nodes/index.js";
import { LaunchError } from "./launch-error.js";
import { secureRunFolder } from "./secure-run-folder.js";
import { launchFilesIn } from "./leftover-listeners.js";
import { defaultReachMs, listCommandLines } from "./processes.js";

/** Which daemon launched from a run folder. */
export interface RunClaim {
  /**
   * The daemon's own id, kept in its state directory (`daemon-id`): it outlives a change of host
   * name or of how the directory is spelled. Undefined where it could not be kept.
   */
  id?: string;
  /** The control machine's host name, to name the daemon in messages (and to tell it without an id). */
  host: string;
  /** The daemon's state directory (absolute), likewise. */
  stateDir: string;
  /** Its definitions directory, to name the daemon in messages (and to say what to do after its state directory moved). */
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
 * daemon's launch may be between its claim and its first process (writing files, choosing ports),
 * or between a teardown (which renews it) and the relaunch after its back-off.
 */
const claimFreshMs = 10 * 60_000;

/** A claim as stored: the daemon, and when it claimed (its clock, ISO 8601). */
interface StoredClaim extends RunClaim {
  at?: string;
}

/** What a look at a folder's claim found: none, a claim, or nothing known (the node did not answer, or refused). */
type ClaimLook = { kind: "none" } | { kind: "claim"; claim: StoredClaim } | { kind: "unknown"; why: string };

/**
 * The same daemon: the same id (its host renamed, its directory spelled otherwise), or the same host
 * and state directory (its state directory wiped, and a new id made: two daemons on one state
 * directory share one ledger, which tells their clusters apart by definitions directory).
 */
export function isSameDaemon(a: RunClaim, b: RunClaim): boolean {
  return (a.id !== undefined && a.id === b.id) || (a.host === b.host && a.stateDir === b.stateDir);
}

/**
 * A claim of this host's daemon of the same definitions directory with another state directory:
 * `state_dir` was moved (its ledger is in the old one), or another daemon with that state directory
 * watched this directory while this one was stopped. Which, only a person can say: it is never
 * taken for this daemon's own (it would stop the other's engines).
 */
function sameDirectoryOtherState(claim: RunClaim, me: RunClaim): boolean {
  return claim.host === me.host && claim.definitions === me.definitions && claim.stateDir !== me.stateDir;
}

/**
 * Whether `runDir` may be treated as `me`'s: "mine" when unclaimed or claimed by `me` (a folder a
 * version that did not claim folders launched is its daemon's as it always was), the claim when
 * another daemon's, "unknown" when the node did not say within `defaultReachMs`.
 */
export async function claimOf(node: NodeAccess, runDir: string, me: RunClaim): Promise<"mine" | "unknown" | StoredClaim> {
  const look = await lookAtClaim(node, runDir);
  if (look.kind === "unknown") return "unknown";
  return look.kind === "none" || isSameDaemon(look.claim, me) ? "mine" : look.claim;
}

/**
 * Claim each run folder for `me` before a launch touches it. One another daemon claimed is taken
 * over only when nothing runs from it and its claim is not fresh (said with `say`); otherwise, or
 * when the claim cannot be read, the launch fails with RunFolderClaimed, naming that daemon and
 * what to do.
 */
export async function claimRunFolders(folders: readonly RunFolder[], me: RunClaim, say: (step: string, detail: string) => void): Promise<void> {
  await Promise.all(
    folders.map(async ({ node, nodeName, runDir }) => {
      // Nothing is read or written in a folder another user could plant links in.
      await secureRunFolder(node, nodeName, runDir);
      const look = await lookAtClaim(node, runDir);
      if (look.kind === "unknown") throw refused(runDir, nodeName, `whether another daemon claimed it could not be read (${look.why})`);
      if (look.kind === "claim" && !isSameDaemon(look.claim, me)) {
        const other = look.claim;
        const running = await processesRunningFrom(node, runDir);
        const claimedMs = other.at === undefined ? Number.NaN : Date.now() - Date.parse(other.at);
        const fresh = claimedMs >= -claimFreshMs && claimedMs < claimFreshMs;
        if (running === undefined || running.length > 0 || fresh) {
          const runs =
            running === undefined
              ? "whose cluster of the same name may run from it (the node did not list its processes in time)"
              : running.length > 0
                ? `whose cluster of the same name runs from it (pids ${running.join(", ")})`
                : `whose cluster of the same name claimed it ${Math.max(0, Math.round(claimedMs / 1000))} s ago and may be starting (a claim is taken over once nothing runs from it for ${claimFreshMs / 60_000} min)`;
          if (sameDirectoryOtherState(other, me)) {
            throw refused(
              runDir,
              nodeName,
              `was claimed by this directory's daemon with state_dir ${other.stateDir} (it is ${me.stateDir} now), ${runs}`,
              `if state_dir was moved, stop the daemon, move the contents of ${other.stateDir} to ${me.stateDir} (or set state_dir back) and start it again, so what runs is adopted; ` +
                "if a daemon with that state_dir runs elsewhere on this directory, stop one of the two. Nothing of it was touched",
            );
          }
          throw refused(runDir, nodeName, `belongs to another shardctl daemon (${describeDaemon(other)}) ${runs}`);
        }
        say("run-folder-taken-over", `${runDir} on ${nodeName} was claimed by another daemon (${describeDaemon(other)}), but nothing runs from it: this daemon takes it`);
      }
      const kept = await within(defaultReachMs, writeClaim(node, runDir, me), false);
      // Read back: of two daemons claiming at one moment, only the one whose claim stands goes on.
      const now = await lookAtClaim(node, runDir);
      if (kept && now.kind === "claim" && !isSameDaemon(now.claim, me)) {
        throw refused(runDir, nodeName, `was claimed by another shardctl daemon (${describeDaemon(now.claim)}) at the same moment`);
      }
    }),
  );
}

/**
 * Renew `me`'s claim on `runDir`, which claimOf found `me`'s (a teardown: the relaunch comes after
 * its back-off); bounded by `defaultReachMs`.
 */
export async function renewClaim(node: NodeAccess, runDir: string, me: RunClaim): Promise<void> {
  await within(defaultReachMs, writeClaim(node, runDir, me), false);
}

/** RunFolderClaimed: the folder, why it is not this daemon's, what to do (by default: another daemon's cluster of the same name). */
function refused(
  runDir: string,
  nodeName: string,
  why: string,
  advice = "rename one of the two clusters, or give the node another model_dir in one daemon's settings; if that daemon is gone for good, stop what it left running there. Nothing of the other cluster was touched",
): LaunchError {
  return new LaunchError("RunFolderClaimed", "claim-run-folder", `the run folder ${runDir} on ${nodeName} ${why}: ${advice}; retried with back-off`);
}

function describeDaemon(claim: RunClaim): string {
  return `host ${showText(claim.host)}, state_dir ${showText(claim.stateDir)}, definitions ${showText(claim.definitions)}`;
}

async function lookAtClaim(node: NodeAccess, runDir: string): Promise<ClaimLook> {
  const file = posix.join(runDir, claimFileName);
  const read = async (): Promise<ClaimLook> => {
    if ((await node.stat(file)) === undefined) return { kind: "none" };
    const text = (await node.readFile(file)).toString("utf8");
    return parseClaim(text);
  };
  return within(
    defaultReachMs,
    read().catch((error: unknown): ClaimLook => ({ kind: "unknown", why: error instanceof Error ? error.message : String(error) })),
    { kind: "unknown", why: `no answer within ${defaultReachMs} ms` } as ClaimLook,
  );
}

/** A claim file's text: a claim, or none when it is not one (a half-written file says nothing of anyone). */
function parseClaim(text: string): ClaimLook {
  try {
    const parsed = JSON.parse(text) as Partial<StoredClaim>;
    if (typeof parsed.host !== "string" || typeof parsed.stateDir !== "string") return { kind: "none" };
    return {
      kind: "claim",
      claim: {
        host: parsed.host,
        stateDir: parsed.stateDir,
        definitions: typeof parsed.definitions === "string" ? parsed.definitions : "",
        ...(typeof parsed.id === "string" ? { id: parsed.id } : {}),
        ...(typeof parsed.at === "string" ? { at: parsed.at } : {}),
      },
    };
  } catch {
    return { kind: "none" };
  }
}

/** Write `me`'s claim (whole: a temporary file renamed over it); false when the node refused. */
async function writeClaim(node: NodeAccess, runDir: string, me: RunClaim): Promise<boolean> {
  const file = posix.join(runDir, claimFileName);
  const draft = `${file}.${process.pid}.tmp`;
  try {
    await node.mkdir(runDir);
    const claim: StoredClaim = { ...me, at: new Date().toISOString() };
    await node.writeFile(draft, `${JSON.stringify(claim)}\n`);
    await node.rename(draft, file);
    return true;
  } catch {
    // The launch files, written next, fail with the node's own words where the folder is unwritable.
    await node.remove(draft).catch(() => undefined);
    return false;
  }
}

/**
 * Pids of the processes on `node` started from `runDir` by a launch: an engine handed the launch's
 * cluster config or hostfile, or the `sh` that runs an engine and writes its exit status there.
 * Someone reading a log there is not one. Undefined when the node did not answer in time: a
 * folder is never taken on a guess.
 */
async function processesRunningFrom(node: NodeAccess, runDir: string): Promise<number[] | undefined> {
  const dir = runDir.replace(/\/+$/, "");
  const listed = await listCommandLines(node, { deadlineMs: defaultReachMs }).catch(() => undefined);
  if (listed === undefined) return undefined;
  const launchFiles = launchFilesIn(dir);
  const wrapper = new RegExp(`^(sh -c|env ).* ${escapeRegExp(dir)}/[^ /]+\\.exit( |$)`);
  return listed.filter(({ args }) => launchFiles.some((file) => args.includes(file)) || wrapper.test(args)).map(({ pid }) => pid);
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}
