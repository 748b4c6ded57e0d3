/**
 * The launch timeline: the ordered bring-up (ports, stages, coordinator, health, router) as a
 * horizontal bar whose segments last as long as each step took, with the same steps listed below
 * with their times and durations for screen readers and for copying.
 */
import { formatClock, formatDuration } from "../format.js";
import type { StatusView } from "../status-types.js";

export function Timeline({ events }: { events: StatusView["timeline"] }) {
  if (events.length === 0) return <p class="muted">No launch recorded yet.</p>;
  const times = events.map((e) => Date.parse(e.at));
  const start = times[0]!;
  const total = Math.max(1, times.at(-1)! - start);
  const steps = events.map((e, i) => ({ ...e, ms: i === 0 ? 0 : times[i]! - times[i - 1]! }));
  return (
    <div data-testid="timeline">
      <div class="timeline-bar" aria-hidden="true">
        {steps.slice(1).map((s, i) => (
          <div
            class={`timeline-segment hue-${i % 6}${s.step.includes("fail") || s.step.includes("unhealthy") ? " failed" : ""}`}
            style={{ flexGrow: Math.max(s.ms, total / 100) }}
            title={`${s.step}: ${formatDuration(s.ms)}`}
            key={i}
          >
            <span>{s.step}</span>
          </div>
        ))}
      </div>
      <div class="layer-scale" aria-hidden="true">
        <span>{formatClock(start)}</span>
        <span>{formatDuration(total)} in all</span>
      </div>
      <ol class="timeline-list">
        {steps.map((s, i) => (
          <li key={i}>
            <time dateTime={s.at}>{formatClock(s.at)}</time> <strong>{s.step}</strong>
            {i > 0 ? <span class="muted"> +{formatDuration(s.ms)}</span> : null}
            {s.detail === undefined ? null : <span class="muted small"> — {s.detail}</span>}
          </li>
        ))}
      </ol>
    </div>
  );
}
