/** The two badges of a cluster row: the Cluster kind (a sharded session) and its aggregate health. */
import type { Health } from "../status-types.js";

/** The tone each health reads in: colour is never the only signal, the word is always there. */
const tones: Record<Health, string> = {
  Healthy: "good",
  Progressing: "busy",
  Degraded: "warn",
  Unhealthy: "bad",
  Stalled: "bad",
  Stopped: "idle",
  Suspended: "idle",
  Disabled: "idle",
};

export function HealthBadge({ health }: { health: Health }) {
  return (
    <span class={`badge tone-${tones[health]}`} data-health={health} data-testid="health-badge">
      {health}
    </span>
  );
}

export function ClusterBadge({ stages }: { stages: number }) {
  return (
    <span class="badge kind" title={`one model served as a pipeline of ${stages} stages`}>
      Cluster
    </span>
  );
}
