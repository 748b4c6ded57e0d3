/**
 * The files a launch writes on its nodes before it starts anything: the engine config and the
 * per-launch transport token in each run folder, the previous launch's logs kept short beside them.
 */
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import type { EngineTopology, ProcessFiles } from "../engines/index.js";
import { LaunchError } from "./launch-error.js";
import { plannedProcess } from "./processes.js";
import type { LaunchRequest } from "./types.js";
import { freeKiB, within, type NodeAccess } from "../nodes/index.js";
import { isShardctlError, messageOf } from "../errors/index.js";

/** The most of a previous launch's log kept beside the next one's (`<label>.log.previous`), bytes: 1 MiB. */
const previousLogBytes = 1 << 20;

/**
 * $1 = a log. Its last previousLogBytes go to `$1.previous` (written whole, then renamed: a full
 * disk leaves the last one kept), and the log is removed.
 */
const keepPreviousLogScript = `[ -f "$1" ] || exit 0
tail -c ${previousLogBytes} "$1" > "$1.previous.tmp" 2>/dev/null && mv -f "$1.previous.tmp" "$1.previous" || rm -f "$1.previous.tmp"
rm -f "$1"`;

/** Remove a previous launch's log, its end kept as `<log>.previous`; a node that does not answer has it removed by the process's own start. */
async function keepPreviousLog(node: NodeAccess, logFile: string): Promise<void> {
  const result = await node.run(["sh", "-c", keepPreviousLogScript, "sh", logFile], { deadlineMs: 5_000 });
  if (result.exitCode !== 0) await node.remove(logFile);
}

/** The engine config (and the token, when the engine authenticates) in each process's run directory. */
export async function writeLaunchFiles(request: LaunchRequest, topology: EngineTopology): Promise<Map<string, ProcessFiles>> {
  const config = request.driver.renderClusterConfig(topology);
  // One token per launch; it is written only to 0600 files on the nodes, never logged or recorded.
  const token = request.driver.facts.authenticatesTransport ? randomBytes(32).toString("hex") : undefined;
  const targets = [...request.stages, request.coordinator];
  const files = new Map<string, ProcessFiles>();
  // The node being written, for the message of a write that fails.
  let writing: (typeof targets)[number] | undefined;
  try {
    // The last launch's logs go first: an engine that filled its disk with its log would otherwise
    // leave no room for the files of the next launch. Their last MiB is kept beside them (see
    // keepPreviousLog), where the disk has room for it: what a member that died said is not erased.
    await Promise.all(
      targets.map((target) =>
        keepPreviousLog(
          target.node,
          ("index" in target
            ? plannedProcess("stage", target.index, target.nodeName, target.runDir)
            : plannedProcess("coordinator", undefined, target.nodeName, target.runDir)
          ).logFile,
        ),
      ),
    );
    for (const target of targets) {
      writing = target;
      const paths: ProcessFiles = {
        modelDir: target.modelDir,
        clusterConfig: join(target.runDir, request.driver.clusterConfigName),
        tokenFile: join(target.runDir, "transport.token"),
        cacheDir: join(target.runDir, "cache"),
      };
      if (!files.has(target.runDir)) {
        await target.node.mkdir(paths.cacheDir);
        await target.node.writeFile(paths.clusterConfig, config);
        if (token !== undefined) await target.node.writeFile(paths.tokenFile, token + "\n", { mode: 0o600 });
      }
      files.set(target.runDir, paths);
    }
  } catch (error) {
    // A node that fell silent (a partition) is no fault of the files, nor of the cluster.
    const reason = isShardctlError(error, "NodeUnreachable") ? "NodeUnreachable" : "LaunchFilesFailed";
    // A silent node's error names it already.
    const where = writing === undefined || reason === "NodeUnreachable" ? "" : ` in ${writing.runDir} on ${writing.nodeName}`;
    const free = reason === "LaunchFilesFailed" && writing !== undefined ? await within(2_000, freeKiB(writing.node, writing.runDir), undefined) : undefined;
    // Read-only first: a small read-only file system also has little room, which is not the fault.
    const readOnly = /read-only file system|EROFS/i.test(messageOf(error));
    const full = !readOnly && free !== undefined && free < 1024 ? `; the file system holding it is full (${free} KiB free): free space there` : "";
    const why = readOnly ? "; the file system holding it is read-only: remount it read-write" : full === "" ? "; that folder must be writable by the node's user" : full;
    const fix = reason === "LaunchFilesFailed" ? `${why} (the launch is tried again meanwhile, not counted against the restart budget)` : "";
    throw new LaunchError(reason, "launch-files", `could not write the launch files${where}: ${messageOf(error)}${fix}`, { cause: error });
  }
  return files;
}
