/**
 * `shardctl nodes [--json] [--config shardctl.toml] [--engine-binary b]`: probe every registered node
 * (in parallel, over the pooled connections) and show its capability badge, memory and disk, and
 * warn of one whose commands are slow to answer.
 * Exit 0 when every node answered, 1 otherwise.
 */
import { parseArgs } from "node:util";
import { createProbeCache, formatBadge, type NodeAccess, type NodeProbe } from "../../nodes/index.js";
import { createNodePool } from "../../cluster/index.js";
import { formatBytes } from "../../planner/index.js";
import { showText } from "../../errors/index.js";
import { contextOptions, loadContext } from "../context.js";
import { allowed, patterns } from "../../spec/index.js";
import { UsageError } from "../usage-error.js";

export async function run(args: string[]): Promise<number> {
  const { values } = parseArgs({
    args,
    options: { ...contextOptions, json: { type: "boolean" }, "engine-binary": { type: "string" } },
  });
  const binary = values["engine-binary"];
  // The same rule as [engine] binary: no shell on the node would expand a program's `~/`.
  if (binary !== undefined && !patterns.binary.test(binary)) throw new UsageError(`--engine-binary ${JSON.stringify(binary)}: expected ${allowed.binary}`);
  const { settings } = await loadContext(values);
  const pool = createNodePool(settings);
  const probe = createProbeCache({ engineBinary: values["engine-binary"] });
  try {
    const entries = Object.values(settings.nodes);
    const probes = await Promise.all(
      entries.map(async (entry) => {
        const found = await probe(pool.get(entry));
        return found.reachable ? { ...found, ...(await timeCommand(pool.get(entry))) } : found;
      }),
    );
    const rows = probes.map((p, i) => ({ ...p, host: entries[i]!.host, declaredEngineVersion: entries[i]!.engineVersion }));
    if (values.json) console.log(showText(JSON.stringify(rows, null, 2), { keepLines: true }));
    else printTable(rows);
    return probes.every((p) => p.reachable && p.error === undefined) ? 0 : 1;
  } finally {
    await pool.close();
  }
}

/**
 * A command's round trip on a node whose connection is made, ms (the quicker of two `true`): what
 * every liveness probe pays. Most of it, when large, is the node's shell start-up (a pyenv or conda
 * init in ~/.bashrc, which bash runs for SSH commands too).
 */
async function timeCommand(node: NodeAccess): Promise<{ commandMs?: number; shellPrints?: string }> {
  let best: number | undefined;
  let shellPrints: string | undefined;
  for (let i = 0; i < 2; i++) {
    const asked = performance.now();
    const result = await node.run(["true"], { deadlineMs: commandDeadlineMs });
    if (result.exitCode !== 0) break;
    best = Math.min(best ?? Infinity, Math.round(performance.now() - asked));
    // Its first line with words, or said to be blank (blank lines break SFTP as well).
    if (result.preamble !== undefined)
      shellPrints ??=
        result.preamble
          .split("\n")
          .find((line) => line.trim() !== "")
          ?.trim()
          .slice(0, 80) ?? "(blank lines)";
  }
  return { ...(best === undefined ? {} : { commandMs: best }), ...(shellPrints === undefined ? {} : { shellPrints }) };
}

/** What `shardctl nodes` says of a shell that prints for ssh sessions (its first line, clipped). */
function shellPrintsNote(first: string | undefined): string {
  if (first === undefined) return "";
  return `its shell prints text for ssh sessions (${JSON.stringify(first)}): commands work, but a push fails where sshd starts its SFTP server through the shell; see troubleshooting, "A shell that prints"`;
}

function cgroupNote(limit: number | undefined): string {
  if (limit === undefined) return "";
  return `its commands run in a memory cgroup limited to ${formatBytes(limit)} (a container's, a user slice's): memory is that limit and what it leaves, which plans are budgeted with`;
}

/** A command's round trip, ms, above which the table's NOTE warns: a quarter of a liveness probe's deadline (1000 ms). */
const slowCommandMs = 250;
const commandDeadlineMs = 5_000;

function slowCommandNote(ms: number | undefined): string {
  if (ms === undefined || ms < slowCommandMs) return "";
  return `each command takes ${ms} ms to answer (liveness probes allow 1000 ms, then 5000 ms once): its shell start-up files, or a long round trip to it (a command takes about 3)? see troubleshooting, "Slow commands on a node"`;
}

function printTable(rows: Array<NodeProbe & { host: string; declaredEngineVersion?: string; commandMs?: number; shellPrints?: string }>): void {
  const table = [["NODE", "HOST", "CAPABILITY", "MEMORY FREE/TOTAL", "DISK FREE", "NOTE"]];
  for (const r of rows) {
    const capped = r.cgroupMemoryLimitBytes === undefined ? "" : " (cgroup)";
    const memory = r.memoryTotalBytes === undefined ? "-" : `${formatBytes(r.memoryAvailableBytes ?? 0)} / ${formatBytes(r.memoryTotalBytes)}${capped}`;
    const badge = r.engineVersion === undefined && r.declaredEngineVersion !== undefined ? `${formatBadge(r)} (declared ${r.declaredEngineVersion})` : formatBadge(r);
    const note = [r.error, cgroupNote(r.cgroupMemoryLimitBytes), slowCommandNote(r.commandMs), shellPrintsNote(r.shellPrints)]
      .filter((n) => n !== undefined && n !== "")
      .join("; ");
    // A node's answers (its engine's version line, an error's output) are printed escaped: a terminal acts on their control characters.
    table.push([r.name, r.host, showText(badge), memory, r.diskFreeBytes === undefined ? "-" : formatBytes(r.diskFreeBytes), showText(note)]);
  }
  const widths = table[0]!.map((_, c) => Math.max(...table.map((row) => row[c]!.length)));
  for (const row of table)
    console.log(
      row
        .map((cell, c) => cell.padEnd(widths[c]!))
        .join("  ")
        .trimEnd(),
    );
}
