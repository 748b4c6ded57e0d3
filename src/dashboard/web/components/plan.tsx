/**
 * The shard plan as pictures: one layer bar across the nodes (each stage's share of the layers, in
 * pipeline order) and one memory-fit bar per node (weights, KV cache and headroom against the
 * node's budget, and where that budget came from).
 */
import { formatBytes } from "../format.js";
import type { PlanView } from "../status-types.js";

export function LayerBar({ plan }: { plan: PlanView }) {
  const layers = plan.stages.at(-1)?.layers[1] ?? 0;
  if (layers === 0) return <p class="muted">No layers planned.</p>;
  return (
    <div>
      <div
        class="layer-bar"
        role="img"
        aria-label={`${layers} layers over ${plan.stages.length} stages: ${plan.stages.map(describeStage).join("; ")}`}
        data-testid="layer-bar"
      >
        {plan.stages.map((s) => (
          <div class={`layer-segment hue-${s.index % 6}`} style={{ flexGrow: s.layers[1] - s.layers[0] }} title={describeStage(s)} key={s.index}>
            {/* The node first: a narrow segment (a plan of a dozen stages) still shows whose it is. */}
            <span class="segment-label">
              {s.node} · stage {s.index}
            </span>
            {/* Half-open, as the stage cards, `shardctl status` and the status file write a range. */}
            <span class="segment-detail">
              layers [{s.layers[0]}, {s.layers[1]})
            </span>
          </div>
        ))}
      </div>
      <div class="layer-scale" aria-hidden="true">
        <span>0</span>
        <span>{layers} layers</span>
      </div>
    </div>
  );
}

function describeStage(s: PlanView["stages"][number]): string {
  return `stage ${s.index} on ${s.node}: layers ${s.layers[0]} to ${s.layers[1] - 1} (${s.layers[1] - s.layers[0]})`;
}

export function MemoryFit({ plan }: { plan: PlanView }) {
  return (
    <div class="fit-list">
      {plan.stages.map((s) => {
        const budget = s.budgetBytes;
        const scale = Math.max(budget ?? 0, s.totalBytes) || 1;
        const headroom = budget === null ? 0 : Math.max(0, budget - s.totalBytes);
        const fits = s.fit === null || s.fit <= 1;
        const label = `${s.node}: weights ${formatBytes(s.weightBytes)}, KV cache ${formatBytes(s.kvBytes)}, ${
          budget === null
            ? "no known budget"
            : `${fits ? "headroom" : "over budget by"} ${formatBytes(fits ? headroom : s.totalBytes - budget)} of a ${formatBytes(budget)} budget`
        }`;
        return (
          <div class="fit-row" key={s.index} data-testid="fit-row">
            <div class="fit-head">
              <strong>{s.node}</strong>
              <span class={fits ? "muted" : "over"}>{s.fit === null ? "fit unknown" : `${formatFit(s.fit)} of budget${fits ? "" : " — does not fit"}`}</span>
            </div>
            <div class="fit-bar" role="img" aria-label={label}>
              <div class="fit-weights" style={{ width: pct(s.weightBytes, scale) }} />
              <div class="fit-kv" style={{ width: pct(s.kvBytes, scale) }} />
              <div class="fit-headroom" style={{ width: pct(headroom, scale) }} />
            </div>
            <div class="fit-legend small">
              <span>
                <i class="swatch fit-weights" /> weights {formatBytes(s.weightBytes)}
              </span>
              <span>
                <i class="swatch fit-kv" /> KV {formatBytes(s.kvBytes)}
              </span>
              <span>
                <i class="swatch fit-headroom" /> headroom {budget === null ? "–" : formatBytes(headroom)}
              </span>
              <span>
                budget {budget === null ? "unknown" : formatBytes(budget)} ({sourceWords[s.budgetSource ?? "unknown"]})
              </span>
            </div>
          </div>
        );
      })}
    </div>
  );
}

/** Where a budget came from, in words (the status's budgetSource). */
const sourceWords: Record<NonNullable<PlanView["stages"][number]["budgetSource"]> | "unknown", string> = {
  declared: "declared in the node registry",
  probed: "probed: free memory the node reported",
  "probed-capped-by-declared": "probed, capped by the declared memory",
  "memory-limit": "the registry's memory_limit",
  unknown: "source unknown",
};

/** 0.4567 → "45.7%"; a share that rounds to nothing says so rather than "0%". */
function formatFit(fit: number): string {
  return fit > 0 && fit < 0.001 ? "< 0.1%" : `${Math.round(fit * 1000) / 10}%`;
}

function pct(part: number, whole: number): string {
  return `${Math.min(100, (part / whole) * 100).toFixed(2)}%`;
}

export function PlanWarnings({ plan }: { plan: PlanView }) {
  if (plan.warnings.length === 0) return null;
  return (
    <ul class="notes">
      {plan.warnings.map((w) => (
        <li key={w.reason + w.message}>
          <code>{w.reason}</code> {w.message}
        </li>
      ))}
    </ul>
  );
}
