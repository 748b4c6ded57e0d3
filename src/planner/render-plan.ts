import { showText } from "../errors/index.js";
import { formatBytes } from "./format-bytes.js";
import { codeSpan } from "./markdown-text.js";
import { budgetSourceLabels } from "./node-budget.js";
import type { PlanMessage, ShardPlan, StagePlan } from "./plan-types.js";

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
 * ANSI colours: green fit < 85 %, yellow up to 100 %, red beyond. What the model says of itself
 * (its source, family, dtype, and the messages that quote its files and tensors) is shown with
 * every control character escaped, newlines too, so it cannot clear, retitle or add lines.
 */
export function renderPlanText(plan: ShardPlan, options: { color?: boolean } = {}): string {
  const paint = (code: string, text: string): string => (options.color === true ? `${code}${text}${ansi.reset}` : text);
  const lines: string[] = [];
  const quant = plan.model.quantizationBits === null ? showText(plan.model.dtype) : `${plan.model.quantizationBits}-bit`;
  lines.push(
    `${showText(plan.model.source)}: ${showText(plan.model.family)}, ${plan.model.layers} layers, ${quant}; ` +
      `engine ${plan.engine}, strategy ${plan.strategy}` +
      (plan.splitUsed !== plan.strategy ? ` (showing the ${plan.splitUsed} split)` : "") +
      `, context ${plan.options.contextLength} × ${plan.options.maxSequences}, headroom ${plan.options.headroom}`,
  );
  const header = ["STAGE", "NODE", "LAYERS", "WEIGHTS", "KV", "TOTAL", "BUDGET", "SOURCE", "FIT"];
  const rows = plan.stages.map((s) => [
    stageLabel(s),
    showText(s.node),
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
  for (const w of plan.warnings) lines.push(paint(ansi.yellow, `warning ${w.reason}: ${showText(w.message)}`));
  for (const e of plan.errors) lines.push(paint(ansi.red, `error ${e.reason}: ${showText(e.message)}`));
  lines.push(
    plan.feasible ? paint(ansi.green, "plan: feasible") : paint(ansi.red, `plan: infeasible (${plan.errors.length} error${plan.errors.length === 1 ? "" : "s"})`),
  );
  return lines.join("\n") + "\n";
}

/**
 * Why a plan is infeasible, in one line: its errors, each with its reason, as the daemon's status
 * and `shardctl diff` say it.
 */
export function describeInfeasiblePlan(errors: readonly PlanMessage[]): string {
  return `the plan is infeasible: ${errors.map((e) => `${e.reason}: ${e.message}`).join("; ")}`;
}

/**
 * The plan as GitHub-flavoured Markdown for a pull-request comment. What the model says of itself
 * (its source, family, and the messages that may quote its files and tensors) is put in code spans
 * (codeSpan), so a model_type of "## approved" or `<img>` shows as text and renders nothing.
 */
export function renderPlanMarkdown(plan: ShardPlan): string {
  // Node names are the registry's (letters, digits and '-'); a '|' would still end the table cell.
  const esc = (text: string): string => text.replace(/\|/g, "\\|");
  const lines: string[] = [];
  const verdict = plan.feasible ? "✅ feasible" : `❌ infeasible (${plan.errors.length} error${plan.errors.length === 1 ? "" : "s"})`;
  lines.push(`### Shard plan: ${codeSpan(plan.model.source)} — ${verdict}`, "");
  lines.push(
    `${codeSpan(plan.model.family)}, ${plan.model.layers} layers, engine \`${plan.engine}\`, strategy \`${plan.strategy}\`, ` +
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
    for (const e of plan.errors) lines.push(`- \`${e.reason}\`: ${codeSpan(e.message)}`);
  }
  if (plan.warnings.length > 0) {
    lines.push("", "**Warnings**", "");
    for (const w of plan.warnings) lines.push(`- \`${w.reason}\`: ${codeSpan(w.message)}`);
  }
  return lines.join("\n") + "\n";
}
