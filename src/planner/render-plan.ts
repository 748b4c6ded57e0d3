import { formatBytes } from "./format-bytes.js";
import { budgetSourceLabels } from "./node-budget.js";
import type { ShardPlan, StagePlan } from "./plan-types.js";

/** Width of the memory-fit bar (cells). */
const barCells = 10;

/** A memory-fit bar, e.g. `[██████░░░░] 62%`; a full bar and a percentage > 100 when over. */
export function renderFitBar(fit: number | null): string {
  if (fit === null) return `[${"?".repeat(barCells)}]   ?`;
  const filled = Math.max(0, Math.min(barCells, Math.round(fit * barCells)));
  const percent = Number.isFinite(fit) ? `${Math.round(fit * 100)}%` : "∞";
  return `[${"█".repeat(filled)}${"░".repeat(barCells - filled)}] ${percent.padStart(4)}`;
}

const ansi = { red: "\u001b[31m", yellow: "\u001b[33m", green: "\u001b[32m", bold: "\u001b[1m", reset: "\u001b[0m" };

/** "0", or "0 (rank 1)" for an engine that numbers its stages otherwise. */
function stageLabel(stage: StagePlan): string {
  return stage.rank === undefined ? String(stage.index) : `${stage.index} (rank ${stage.rank})`;
}

function layerRange(stage: StagePlan): string {
  return `[${stage.layers[0]}, ${stage.layers[1]})`;
}

/** Where a stage's budget came from, as the plan shows it. */
function budgetFrom(stage: StagePlan): string {
  return stage.budgetSource === null ? "-" : budgetSourceLabels[stage.budgetSource];
}

/**
 * The plan for a terminal: a header line, one row per stage (node, half-open layer range,
 * weights, KV, budget and where it came from, fit bar), totals, then warnings and errors. `color` (default false) adds
 * ANSI colours: green fit < 85 %, yellow up to 100 %, red beyond.
 */
export function renderPlanText(plan: ShardPlan, options: { color?: boolean } = {}): string {
  const paint = (code: string, text: string): string => (options.color === true ? `${code}${text}${ansi.reset}` : text);
  const lines: string[] = [];
  const quant = plan.model.quantizationBits === null ? plan.model.dtype : `${plan.model.quantizationBits}-bit`;
  lines.push(
    `${plan.model.source}: ${plan.model.family}, ${plan.model.layers} layers, ${quant}; ` +
      `engine ${plan.engine}, strategy ${plan.strategy}` +
      (plan.splitUsed !== plan.strategy ? ` (showing the ${plan.splitUsed} split)` : "") +
      `, context ${plan.options.contextLength} × ${plan.options.maxSequences}, headroom ${plan.options.headroom}`,
  );
  const header = ["STAGE", "NODE", "LAYERS", "WEIGHTS", "KV", "TOTAL", "BUDGET", "SOURCE", "FIT"];
  const rows = plan.stages.map((s) => [
    stageLabel(s),
    s.node,
    layerRange(s),
    formatBytes(s.weightBytes),
    formatBytes(s.kvBytes),
    formatBytes(s.totalBytes),
    s.budgetBytes === null ? "unknown" : formatBytes(s.budgetBytes),
    budgetFrom(s),
    renderFitBar(s.fit),
  ]);
  const widths = header.map((h, c) => Math.max(h.length, ...rows.map((r) => (r[c] ?? "").length)));
  const format = (cells: string[]): string =>
    cells
      .map((cell, c) => (c === cells.length - 1 ? cell : c >= 3 && c <= 6 ? cell.padStart(widths[c]!) : cell.padEnd(widths[c]!)))
      .join("  ")
      .trimEnd();
  lines.push(paint(ansi.bold, format(header)));
  for (const [i, row] of rows.entries()) {
    const fit = plan.stages[i]?.fit ?? null;
    const code = fit === null || fit > 1 ? ansi.red : fit > 0.85 ? ansi.yellow : ansi.green;
    lines.push(format([...row.slice(0, -1), paint(code, row[row.length - 1] ?? "")]));
  }
  if (plan.stages.length === 0) lines.push("(no stages)");
  const t = plan.totals;
  lines.push(
    `total: ${formatBytes(t.weightBytes)} weights + ${formatBytes(t.kvBytes)} KV = ${formatBytes(t.totalBytes)}` +
      (t.budgetBytes === null ? "" : ` of ${formatBytes(t.budgetBytes)} budget`),
  );
  for (const w of plan.warnings) lines.push(paint(ansi.yellow, `warning ${w.reason}: ${w.message}`));
  for (const e of plan.errors) lines.push(paint(ansi.red, `error ${e.reason}: ${e.message}`));
  lines.push(
    plan.feasible ? paint(ansi.green, "plan: feasible") : paint(ansi.red, `plan: infeasible (${plan.errors.length} error${plan.errors.length === 1 ? "" : "s"})`),
  );
  return lines.join("\n") + "\n";
}

/** The plan as GitHub-flavoured Markdown for a pull-request comment. */
export function renderPlanMarkdown(plan: ShardPlan): string {
  const esc = (text: string): string => text.replace(/\|/g, "\\|");
  const lines: string[] = [];
  const verdict = plan.feasible ? "✅ feasible" : `❌ infeasible (${plan.errors.length} error${plan.errors.length === 1 ? "" : "s"})`;
  lines.push(`### Shard plan: ${esc(plan.model.source)} — ${verdict}`, "");
  lines.push(
    `${plan.model.family}, ${plan.model.layers} layers, engine \`${plan.engine}\`, strategy \`${plan.strategy}\`, ` +
      `context ${plan.options.contextLength} × ${plan.options.maxSequences}, headroom ${plan.options.headroom}`,
    "",
  );
  lines.push("| Stage | Node | Layers | Weights | KV cache | Total | Budget | Budget from | Fit |", "|---:|---|---|---:|---:|---:|---:|---|---|");
  for (const s of plan.stages) {
    lines.push(
      `| ${stageLabel(s)} | ${esc(s.node)} | ${layerRange(s)} | ${formatBytes(s.weightBytes)} | ${formatBytes(s.kvBytes)} | ` +
        `${formatBytes(s.totalBytes)} | ${s.budgetBytes === null ? "unknown" : formatBytes(s.budgetBytes)} | ${budgetFrom(s)} | \`${renderFitBar(s.fit)}\` |`,
    );
  }
  const t = plan.totals;
  lines.push(
    `| | **total** | ${t.layers} layers | ${formatBytes(t.weightBytes)} | ${formatBytes(t.kvBytes)} | ${formatBytes(t.totalBytes)} | ` +
      `${t.budgetBytes === null ? "unknown" : formatBytes(t.budgetBytes)} | | |`,
  );
  if (plan.errors.length > 0) {
    lines.push("", "**Errors**", "");
    for (const e of plan.errors) lines.push(`- \`${e.reason}\`: ${e.message}`);
  }
  if (plan.warnings.length > 0) {
    lines.push("", "**Warnings**", "");
    for (const w of plan.warnings) lines.push(`- \`${w.reason}\`: ${w.message}`);
  }
  return lines.join("\n") + "\n";
}
