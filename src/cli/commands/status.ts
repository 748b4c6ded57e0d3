/**
 * `shardctl status [name] [--json] [--watch]`: read the status files. Without a name, one line
 * per cluster; with a name, the per-stage cards. `--watch` redraws in place every second (into a
 * pipe: a snapshot every second; with --json, one document per line).
 */
import { readdir } from "node:fs/promises";
import { basename, dirname, join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { findClusterFiles } from "../../spec/index.js";
import { launchInPlaceOfCards } from "../../launch-timeline/index.js";
import { findDaemon, readStatus, statusFileFor, type ClusterStatus } from "../../reconciler/index.js";
import { describeKeeper } from "../daemon-keeper.js";
import { isShardctlError, showText } from "../../errors/index.js";
import { entryExists } from "../../files/index.js";
import { contextOptions, loadContext, resolveClusterFile } from "../context.js";
import { waitForSignal } from "../wait-for-signal.js";

export async function run(args: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: { ...contextOptions, json: { type: "boolean" }, watch: { type: "boolean", short: "w" } },
  });
  // Status files are readable whatever state the settings are in: an invalid shardctl.toml is a
  // warning here (the daemon reports it in every status), not a reason to show nothing.
  const context = await loadContext(values).catch((error: unknown) => {
    if (!isShardctlError(error, "InvalidSettings")) throw error;
    console.error(`warning: ${error.message}`);
    return { clustersDir: resolve(values.dir ?? join(dirname(resolve(values.config ?? "shardctl.toml")), "clusters")) };
  });
  const named = positionals.length > 0 ? await Promise.all(positionals.map((p) => resolveStatusRef(p, context.clustersDir))) : undefined;
  const detailed = named !== undefined;

  // What each status file says, and why the ones that exist but cannot be read cannot. The list is
  // looked for again at every read: `--watch` shows a cluster pruned, or one whose definition went.
  const read = async (): Promise<Row[]> =>
    Promise.all(
      (named ?? (await findClustersWithStatus(context.clustersDir))).map(async (f) => ({
        name: basename(f, ".toml"),
        ...(await readRow(statusFileFor(f))),
        ...((await entryExists(f)) ? {} : { definitionGone: true as const }),
      })),
    );
  // `indent`: the JSON's, 2 (a document to read) or 0 (one line of JSON Lines, for --watch).
  const render = (statuses: Row[], indent = 2): string => {
    // JSON leaves DEL, C1 controls and bidi overrides raw; escaped, the document parses the same.
    if (values.json)
      return showText(
        JSON.stringify(detailed && statuses.length === 1 ? (jsonOf(statuses[0]!) ?? null) : statuses.map((s) => jsonOf(s) ?? { cluster: s.name }), null, indent),
        {
          keepLines: true,
        },
      );
    // Statuses quote engines' log lines, nodes' errors and file names: shown, never obeyed by the terminal.
    return showText(detailed ? statuses.map(renderDetail).join("\n\n") : renderList(statuses), { keepLines: true });
  };

  if (!values.watch) {
    const statuses = await read();
    const keeper = await describeKeeper(
      context.clustersDir,
      await findDaemon(context.clustersDir),
      statuses.some((s) => s.status !== undefined),
    );
    if (keeper !== undefined) console.error(keeper);
    console.log(render(statuses));
    const problems = statuses.flatMap((s) => (s.unreadable === undefined ? [] : [s.unreadable]));
    // The detail view says it in place; the list and JSON only mark the row.
    if (!detailed || values.json === true) for (const problem of problems) console.error(showText(problem, { keepLines: true }));
    return problems.length > 0 ? 1 : 0;
  }
  // Live monitor until Ctrl-C, or until whoever reads the output goes (a pipe's reader exits: EPIPE).
  const gone = new Promise<void>((resolve) => process.stdout.on("error", () => resolve()));
  // On a terminal: redrawn in place. Into a pipe or a file: a snapshot every second, without the
  // terminal's screen-clearing codes; with --json, one document per line (JSON Lines).
  const onTerminal = process.stdout.isTTY === true && values.json !== true;
  const draw = async (): Promise<void> => {
    const statuses = await read();
    // Asked at every redraw: the daemon can stop or hang while the monitor runs.
    const keeper = await describeKeeper(
      context.clustersDir,
      await findDaemon(context.clustersDir),
      statuses.some((s) => s.status !== undefined),
    );
    const problems = [...(detailed ? [] : statuses.flatMap((s) => (s.unreadable === undefined ? [] : [s.unreadable]))), ...(keeper === undefined ? [] : [keeper])];
    if (values.json === true) {
      process.stdout.write(`${render(statuses, 0)}\n`);
      if (problems.length > 0) console.error(showText(problems.join("\n"), { keepLines: true }));
      return;
    }
    const below = problems.length === 0 ? "" : `\n\n${showText(problems.join("\n"), { keepLines: true })}`;
    process.stdout.write(onTerminal ? `\x1b[H\x1b[2J${render(statuses)}${below}\n\n(refreshing every second; Ctrl-C to quit)\n` : `${render(statuses)}${below}\n\n`);
  };
  // Listening before the first draw: a Ctrl-C typed while it reads the files still exits 0.
  const stopped = waitForSignal();
  await draw();
  const timer = setInterval(() => void draw(), 1000);
  await Promise.race([stopped, gone]);
  clearInterval(timer);
  return 0;
}

/**
 * A row's status document for `--json`, marked `definitionRemoved` as the definition is now, as the
 * daemon marks it: a file written before the definition went, or came back, with no daemon
 * running since says so too.
 */
function jsonOf(row: Row): ClusterStatus | undefined {
  if (row.status === undefined || (row.definitionGone === true) === (row.status.definitionRemoved === true)) return row.status;
  const { cluster, file, definitionRemoved: _, ...rest } = row.status;
  return { cluster, file, ...(row.definitionGone === true ? { definitionRemoved: true as const } : {}), ...rest };
}

/** Log lines of the last lost launch the detail view prints (the status file keeps a few more). */
const evidenceLines = 8;

/** One cluster's status file: what it says, or why it cannot be read (it exists); neither when absent. */
interface Row {
  name: string;
  status?: ClusterStatus;
  unreadable?: string;
  /** Its definition is gone while its status file stays: a prune under way, stuck or refused. */
  definitionGone?: true;
}

/**
 * The definitions in `dir`, and the clusters whose definition is gone but whose status file stays:
 * the daemon removes a status file once the cluster is pruned, so those still run, or are being
 * torn down (a prune a node holds up, a mass prune refused), and are the ones most worth seeing.
 */
async function findClustersWithStatus(dir: string): Promise<string[]> {
  const definitions = await findClusterFiles(dir);
  const known = new Set(definitions);
  const entries = new Set(await readdir(dir).catch(() => [] as string[]));
  // The definition each status file would be beside, by the daemon's own naming rule.
  const orphaned = [...entries]
    .filter((name) => !name.startsWith(".") && name.endsWith(".json"))
    .map((name) => join(dir, `${name.replace(/\.[^.]*\.json$/, "")}.toml`))
    .filter((file) => !known.has(file) && entries.has(basename(statusFileFor(file))));
  // c2 before c10, as people number their clusters.
  return [...new Set([...definitions, ...orphaned])].sort((a, b) => a.localeCompare(b, "en", { numeric: true }));
}

/** A cluster named on the command line: its definition, or, when that is gone, the name of one whose status file stays. */
async function resolveStatusRef(ref: string, dir: string): Promise<string> {
  try {
    return await resolveClusterFile(ref, dir);
  } catch (error) {
    const file = join(dir, `${ref}.toml`);
    if (!ref.includes("/") && !ref.endsWith(".toml") && (await entryExists(statusFileFor(file)))) return file;
    throw error;
  }
}

async function readRow(file: string): Promise<Omit<Row, "name">> {
  try {
    const status = await readStatus(file);
    return status === undefined ? {} : { status };
  } catch (error) {
    if (!isShardctlError(error, "StatusFileUnreadable")) throw error;
    return { unreadable: error.message };
  }
}

function renderList(rows: Row[]): string {
  const table = [["NAME", "", "HEALTH", "MODEL", "STAGES", "ENDPOINT", "AGE"]];
  for (const { name, status, unreadable, definitionGone } of rows) {
    const kind = definitionGone === true ? "[definition removed]" : "[cluster]";
    if (status === undefined) {
      table.push([name, kind, "-", "-", "-", "-", unreadable === undefined ? "(no status yet)" : "(status file unreadable)"]);
      continue;
    }
    // While a launch runs there are no cards yet: its stages that listen are the ones alive.
    const launching = launchInPlaceOfCards(status);
    const alive = launching !== undefined ? launching.listening : status.stages.filter((s) => s.alive).length;
    // The definition's stage count, however the cluster stopped (planned or not, torn down or never
    // launched); a status without it (an older daemon's) falls back to the plan, then the cards.
    const planned = status.nodes?.length ?? status.plan?.stages.length ?? status.stages.length;
    // A stage whose node did not answer its liveness probe is not counted up, nor down: said apart.
    const unknown = launching !== undefined ? 0 : status.stages.filter((s) => s.liveness === "unknown").length;
    const ready = status.conditions.find((c) => c.type === "Ready");
    // A cluster that is not where it should be says why in the row (the last error's reason, as
    // `Progressing (PortInUse)`): the list is where a failing cluster is noticed first.
    const why = status.health !== "Healthy" && status.health !== "Stopped" && status.lastError !== undefined ? ` (${status.lastError.reason})` : "";
    table.push([
      name,
      kind,
      `${status.health}${why}`,
      status.serving !== undefined && status.serving.model !== status.model ? `${status.model ?? "-"} (serving ${status.serving.model})` : (status.model ?? "-"),
      `${alive}/${planned}${unknown > 0 ? ` (${unknown} unknown)` : ""}`,
      endpointOf(status),
      ready?.status === "True" ? age(ready.lastTransitionTime) : "-",
    ]);
  }
  return formatTable(table);
}

/**
 * The coordinator's address; one whose health is unknown (its node did not answer, or a teardown
 * could not reach it) is said so, not listed as if it served.
 */
function endpointOf(status: ClusterStatus): string {
  const coordinator = status.coordinator;
  if (coordinator === undefined) return "-";
  return coordinator.health === "unknown" ? `${coordinator.url} (health unknown)` : coordinator.url;
}

function renderDetail({ name, status, unreadable, definitionGone }: Row): string {
  if (unreadable !== undefined) return `${name}: ${unreadable}`;
  if (status === undefined)
    return `${name}: no status file yet: the daemon writes one as it first looks at the definition (when no daemon watches the folder, a line on stderr says so)`;
  // No revision yet (a definition invalid from its first version): "-", as the dashboard says it.
  const lines = [
    `${name} [cluster]  ${status.health}  revision ${status.observedRevision.slice(0, 12) || "-"}${describeCommits(status)}`,
    `model ${status.model ?? "-"}`,
  ];
  // An earlier revision serves meanwhile: the cards and the endpoint below are its.
  if (status.serving !== undefined) lines.push(`serving revision ${status.serving.revision.slice(0, 12)}, model ${status.serving.model} (the stages below are its)`);
  if (definitionGone === true) {
    lines.push("its definition is gone: the daemon tears it down and removes this status once it is (the conditions below say how far it got, or why not)");
  }
  if (status.restarts !== undefined) lines.push(`launches ${status.restarts.count} of ${status.restarts.budget} at this revision`);
  const cards = [["STAGE", "NODE", "LAYERS", "PID", "ALIVE", "TRANSPORT", "ADDRESS", "SINCE"]];
  const byIndex = new Map(status.stages.map((s) => [s.index, s]));
  // A launch under way has no cards yet: what its timeline says of each stage stands in for them.
  const launching = launchInPlaceOfCards(status);
  for (const planned of status.plan?.stages ?? (status.stages.length > 0 ? status.stages : unplannedStages(status))) {
    const card = byIndex.get(planned.index);
    const started = launching?.members.get(`stage-${planned.index}`);
    cards.push([
      String(planned.index),
      planned.node,
      planned.layers === undefined ? "-" : `[${planned.layers[0]}, ${planned.layers[1]})`,
      card?.pid === undefined ? (started?.pid ?? "-") : String(card.pid),
      card === undefined
        ? started === undefined
          ? "-"
          : started.stopped
            ? "stopped"
            : started.listening
              ? "yes"
              : "starting"
        : card.alive
          ? "yes"
          : card.liveness === "unknown"
            ? "unknown"
            : "NO",
      card?.transport ?? (started?.listening === true ? "listening" : "-"),
      card?.address ?? started?.address ?? "-",
      card?.since === undefined ? (started?.startedAt === undefined ? "-" : age(started.startedAt)) : age(card.since),
    ]);
  }
  lines.push("", formatTable(cards));
  if (status.coordinator) lines.push("", `coordinator on ${status.coordinator.node}: ${status.coordinator.url} health ${status.coordinator.health}`);
  if (status.router) lines.push(`router backend "${status.router.backend}": ${status.router.registered ? "registered" : "not registered"}`);
  lines.push("", formatTable(conditionTable(status)));
  if (status.lastError) lines.push("", `last error ${status.lastError.reason} at ${status.lastError.at}:`, status.lastError.message);
  // The last lost launch's own words: a pipeline's peers exit when one member hangs, and the dead
  // process's log often names the member that stopped answering.
  const evidence = status.restarts?.evidence.at(-1);
  if (evidence !== undefined) {
    lines.push("", `last lost launch, ${evidence.reason} at ${evidence.at}: ${evidence.message}`);
    const tail = evidence.logTail.slice(-evidenceLines);
    if (tail.length > 0) lines.push(`its last ${tail.length === 1 ? "log line" : `${tail.length} log lines`}:`, ...tail.map((line) => `  ${line}`));
  }
  return lines.join("\n");
}

/**
 * The conditions as rows. While a new revision is rolled out (or refused), some conditions still
 * describe the revision before it: then a REVISION column says which revision each one is about,
 * so a reader does not take the old revision's Ready for the new one's.
 */
function conditionTable(status: ClusterStatus): string[][] {
  const mixed = status.conditions.some((c) => c.observedRevision !== status.observedRevision);
  // Lines on one row, " | " between them, but after a line that announces the next ("…serving):").
  const message = (text: string): string =>
    text
      .split("\n")
      .filter((l) => l.trim() !== "")
      .reduce((row, line) => (row === "" ? line : `${row}${row.endsWith(":") ? " " : " | "}${line.trim()}`), "");
  return [
    ["CONDITION", "STATUS", "REASON", ...(mixed ? ["REVISION"] : []), "MESSAGE"],
    ...status.conditions.map((c) => [c.type, c.status, c.reason, ...(mixed ? [c.observedRevision.slice(0, 12)] : []), message(c.message)]),
  ];
}

/**
 * The two commits a status names: the last one that changed the definition file, and the one the
 * daemon's checkout was at (they differ once other files are committed after it).
 */
function describeCommits(status: ClusterStatus): string {
  // An invalid definition's commit is the one that broke it, while the revision shown is the last
  // valid one, still serving: said, or the two read as one.
  const invalid = status.conditions.some((c) => c.type === "Stalled" && c.status === "True" && c.reason === "InvalidDefinition");
  const parts = [
    ...(status.gitCommit === undefined ? [] : [`definition commit ${status.gitCommit.slice(0, 12)}${invalid ? ", invalid: the revision is the last valid one's" : ""}`]),
    ...(status.gitHead === undefined ? [] : [`checkout at ${status.gitHead.slice(0, 12)}`]),
  ];
  return parts.length === 0 ? "" : ` (${parts.join(", ")})`;
}

/** Rows for the stages of a cluster that is neither planned nor running: its nodes, nothing else known. */
function unplannedStages(status: ClusterStatus): Array<{ index: number; node: string; layers?: readonly [number, number] }> {
  return (status.nodes ?? []).map((node, index) => ({ index, node }));
}

/**
 * Rows as aligned columns. Each cell is one line: a newline or tab in one (a definition's file name
 * may hold them) is shown escaped, or it would break its row in two and could forge another.
 */
function formatTable(table: string[][]): string {
  const rows = table.map((r) => r.map((cell) => showText(cell)));
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? "").length)));
  return rows
    .map((r) =>
      r
        .map((cell, i) => cell.padEnd(widths[i]!))
        .join("  ")
        .trimEnd(),
    )
    .join("\n");
}

function age(since: string): string {
  const seconds = Math.max(0, Math.floor((Date.now() - Date.parse(since)) / 1000));
  if (seconds < 60) return `${seconds}s`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)}m`;
  if (seconds < 86400) return `${Math.floor(seconds / 3600)}h`;
  return `${Math.floor(seconds / 86400)}d`;
}
