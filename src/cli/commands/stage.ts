/**
 * `shardctl stage <cluster> [--json] [--config shardctl.toml] [--dir clusters]`: run staging on its
 * own, exactly as the daemon stages before a launch: plan the cluster as the daemon does (the nodes
 * probed, a Hub branch pinned to its commit), then bring every stage's node to "present" for the
 * files its stage needs (or all files with `files = "all"`) and the coordinator's node to "present"
 * for the config and tokenizer, with progress bars on a TTY. Exit 0 when every node is present, 1
 * otherwise.
 */
import { parseArgs } from "node:util";
import { createNodePool, nodesOfCluster, planForCluster, stageForCluster } from "../../cluster/index.js";
import { showText } from "../../errors/index.js";
import { formatBytes } from "../../planner/index.js";
import { loadCluster, formatIssue } from "../../spec/index.js";
import { settleLockReleases, type NodeState, type StagingProgress } from "../../staging/index.js";
import { contextOptions, loadContext, resolveClusterFile } from "../context.js";
import { usageOf } from "../help/index.js";
import { UsageError } from "../usage-error.js";
import { waitForSignal } from "../wait-for-signal.js";

const usage = usageOf("stage");

export async function run(args: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: { ...contextOptions, json: { type: "boolean" } },
  });
  if (positionals.length !== 1) throw new UsageError(`expected one cluster\n${usage}`);
  const context = await loadContext(values);
  const file = await resolveClusterFile(positionals[0]!, context.clustersDir);
  const loaded = await loadCluster(file, context.settings);
  if (!loaded.ok) {
    for (const issue of loaded.issues) console.error(formatIssue(issue));
    return 1;
  }
  const spec = loaded.value;
  const settings = context.settings;
  if (!settings.distributed.enabled) {
    console.error(`note: [distributed] enabled = false in ${settings.file}: the daemon stages nothing; staging anyway because you asked`);
  }

  const pool = createNodePool(settings);
  try {
    const nodes = nodesOfCluster(spec, settings, pool);
    // The plan the daemon stages from: budgets probed, a Hub branch resolved to its commit once,
    // so the plan and every node's files come from that same commit.
    const planned = await planForCluster(spec, settings, { probe: nodes, pin: true });
    if (!planned.plan.feasible) {
      for (const e of planned.plan.errors) console.error(showText(`${spec.name}: ${e.reason}: ${e.message}`, { keepLines: true }));
      // A script reading the report gets one too: nothing staged, and why (as `plan --json` says it).
      if (values.json) {
        const errors = planned.plan.errors.map((e) => ({ reason: e.reason, message: e.message }));
        console.log(showText(JSON.stringify({ cluster: spec.name, staged: [], failed: [], errors }, null, 2), { keepLines: true }));
      }
      return 1;
    }
    const names = [...new Set([...nodes.stages, nodes.coordinator].map((n) => n.config.name))];
    const bars = createBars(names, !values.json && process.stdout.isTTY === true);
    // Ctrl-C, a CI job's cancel (SIGTERM) or a closed terminal cut the staging as the daemon's cuts do:
    // transfers stop, partial files stay for a resume, and each node's file lock is released, so the
    // next stager (a daemon in another pid namespace, another machine) does not wait two minutes for it.
    const cut = new AbortController();
    let received: NodeJS.Signals | undefined;
    void waitForSignal(["SIGINT", "SIGTERM", "SIGHUP"]).then((signal) => {
      received = signal;
      cut.abort();
    });
    const codeOf = (signal: NodeJS.Signals): number => 128 + ({ SIGHUP: 1, SIGINT: 2, SIGTERM: 15 } as Record<string, number>)[signal]!;
    const result = await stageForCluster(spec, settings, planned, nodes, { onProgress: bars.update, signal: cut.signal }).catch((error: unknown) => {
      if (received === undefined) throw error;
      return undefined;
    });
    bars.finish();
    if (received !== undefined || result === undefined) {
      console.error(`shardctl: staging stopped by ${received ?? "a signal"}; partial files are kept for the next staging to resume`);
      return codeOf(received ?? "SIGINT");
    }
    if (values.json) {
      console.log(showText(JSON.stringify({ cluster: spec.name, commit: result.commit, staged: result.staged, failed: result.failed }, null, 2), { keepLines: true }));
    } else {
      for (const s of result.staged) {
        console.log(
          showText(
            `${s.node}: present (${stateBefore[s.before]}; ${formatBytes(s.bytesTransferred)} in ${s.filesTransferred} files, ${s.hashedFiles} hashed) at ${s.modelPath}`,
          ),
        );
      }
      // A failure's message may carry a node's own output (curl, the shell): printed, never obeyed.
      for (const f of result.failed) console.log(showText(`${f.node}: FAILED ${f.reason}: ${f.message}`, { keepLines: true }));
    }
    return result.failed.length === 0 ? 0 : 1;
  } finally {
    // Locks given back before the connections close (a stopped staging does not wait for them itself).
    await settleLockReleases();
    await pool.close();
  }
}

/** A node's state before staging, in words (`--json` gives the status file's own: present, needs-download, mismatched). */
const stateBefore: Record<NodeState, string> = { present: "already present before", "needs-download": "files missing before", mismatched: "files differing before" };

/** One progress bar per node, redrawn in place on a TTY; otherwise nothing until the summary. */
function createBars(nodes: string[], tty: boolean): { update: (e: StagingProgress) => void; finish: () => void } {
  const latest = new Map<string, StagingProgress>();
  let drawn = 0;
  const width = Math.max(...nodes.map((n) => n.length));
  const draw = (): void => {
    if (drawn > 0) process.stdout.write(`\x1b[${drawn}A`);
    for (const node of nodes) {
      const e = latest.get(node);
      const fraction = e === undefined || e.bytesTotal === 0 ? (e?.phase === "done" ? 1 : 0) : e.bytesDone / e.bytesTotal;
      const filled = Math.round(fraction * 30);
      const detail =
        e === undefined
          ? "waiting"
          : e.phase === "waiting"
            ? showText(
                e.holder === undefined
                  ? `waiting for another staging of ${e.file ?? "a file"} here (the same file: it is transferred once)`
                  : `waiting for ${e.holder}, which stages ${e.file ?? "a file"} here`,
              )
            : `${e.phase.padEnd(8)} ${formatBytes(e.bytesDone)}/${formatBytes(e.bytesTotal)} ${formatBytes(e.rateBytesPerSec)}/s` +
              (e.etaSec === undefined || e.phase === "done" ? "" : ` ETA ${Math.ceil(e.etaSec)}s`);
      process.stdout.write(`\x1b[2K${node.padEnd(width)} [${"#".repeat(filled)}${" ".repeat(30 - filled)}] ${detail}\n`);
    }
    drawn = nodes.length;
  };
  // Without a terminal (CI, a pipe) no bars are drawn, but a wait on another staging's lock is said
  // on stderr, once per node and holder: it can last minutes, and silence looks like a hang.
  const saidWaits = new Set<string>();
  return {
    update: (e) => {
      latest.set(e.node, e);
      if (tty) return draw();
      const wait = `${e.node} ${e.holder ?? ""}`;
      if (e.phase !== "waiting" || saidWaits.has(wait)) return;
      saidWaits.add(wait);
      console.error(
        showText(`${e.node}: waiting for ${e.holder ?? "another staging"}, which stages ${e.file ?? "a file"} there (the same file: it is transferred once)`),
      );
    },
    finish: () => {
      if (tty) draw();
    },
  };
}
