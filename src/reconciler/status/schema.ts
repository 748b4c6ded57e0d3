/**
 * The status file `clusters/<name>.status.json`: what people and CI read. The zod schema is the
 * single source of truth; `schemas/status.schema.json` is generated from it. Key order in the
 * written file follows the order here, so files diff cleanly in git. No secrets, ever.
 */
import { z } from "zod";
import { budgetSources } from "../../planner/index.js";

/** A stage's liveness: "unknown" when its node could not be asked. */
export const livenessValues = ["alive", "gone", "unknown"] as const;
export const healthValues = ["Healthy", "Progressing", "Degraded", "Unhealthy", "Stopped", "Suspended", "Disabled", "Stalled"] as const;
export type Health = (typeof healthValues)[number];

export const conditionTypes = ["Ready", "Reconciling", "Stalled", "Planned", "Staged", "StagesListening", "CoordinatorHealthy", "Registered"] as const;
export type ConditionType = (typeof conditionTypes)[number];

const timestamp = z.iso.datetime().describe("RFC 3339 UTC timestamp");
const reason = z
  .string()
  .regex(/^[A-Z][A-Za-z0-9]*$/)
  .describe("stable CamelCase reason");

export const conditionSchema = z.strictObject({
  type: z.enum(conditionTypes),
  status: z.enum(["True", "False", "Unknown"]),
  reason,
  message: z.string(),
  /** Changes only when `status` flips. */
  lastTransitionTime: timestamp,
  /** The spec revision this condition was computed for. */
  observedRevision: z.string(),
});
export type Condition = z.infer<typeof conditionSchema>;

export const stagePlanSchema = z.strictObject({
  index: z.int().nonnegative(),
  node: z.string(),
  layers: z.tuple([z.int().nonnegative(), z.int().nonnegative()]).describe("half-open [start, end)"),
  weightBytes: z.int().nonnegative(),
  kvBytes: z.int().nonnegative(),
  totalBytes: z.int().nonnegative(),
  budgetBytes: z.int().nonnegative().nullable().describe("null when the node's memory is unknown"),
  budgetSource: z
    .enum(budgetSources)
    .nullable()
    .optional()
    .describe(
      "the figure budgetBytes came from (before headroom): declared (the registry's memory; nothing probed), probed (the free memory the node reported), probed-capped-by-declared (the node reported more than its declared memory, which caps it), memory-limit (the registry's memory_limit was smallest); null when no figure is known",
    ),
  fit: z.number().nonnegative().nullable().describe("totalBytes / budgetBytes; null without a budget"),
});

export const planStatusSchema = z.strictObject({
  strategy: z.enum(["equal", "memory"]),
  feasible: z.boolean(),
  stages: z.array(stagePlanSchema),
  warnings: z.array(z.strictObject({ reason, message: z.string() })),
});

export const stagingStatusSchema = z.strictObject({
  node: z.string(),
  state: z.enum(["present", "needs-download", "mismatched", "staging", "failed", "unknown"]),
  bytesDone: z.int().nonnegative(),
  bytesTotal: z.int().nonnegative(),
  /** Why the node failed, while its state is "failed"; `WaitingForLock` while "staging" waits for another process's lock. */
  reason: reason.optional(),
  message: z.string().optional(),
});

export const stageCardSchema = z.strictObject({
  index: z.int().nonnegative(),
  node: z.string(),
  layers: z.tuple([z.int().nonnegative(), z.int().nonnegative()]),
  address: z.string().optional(),
  pid: z.int().positive().optional(),
  // The engine's own number for the stage when it is not the index (mlx-lm's ring rank: reversed).
  rank: z.int().nonnegative().optional(),
  alive: z.boolean(),
  // "unknown": the node could not be asked (alive is then false without the process being known gone).
  liveness: z.enum(livenessValues).optional(),
  // "not-probed": a ring transport (mlx-lm) that a probe would break; /health and the generation watchdog judge it.
  transport: z.enum(["listening", "closed", "unknown", "not-probed"]),
  since: timestamp.optional(),
});

export const coordinatorStatusSchema = z.strictObject({
  node: z.string(),
  url: z.string(),
  pid: z.int().positive().optional(),
  health: z.enum(["ok", "loading", "down", "unknown"]),
  said: z.string().optional(),
});

export const routerStatusSchema = z.strictObject({
  backend: z.string(),
  url: z.string(),
  registered: z.boolean(),
});

export const timelineEventSchema = z.strictObject({
  at: timestamp,
  step: z.string(),
  detail: z.string().optional(),
});

export const restartsSchema = z.strictObject({
  revision: z.string(),
  count: z.int().nonnegative(),
  budget: z.int().nonnegative(),
  /** Exit codes and last log lines of the launches that died, oldest first. */
  evidence: z.array(z.strictObject({ at: timestamp, reason, message: z.string(), logTail: z.array(z.string()) })),
});

export const passSchema = z.strictObject({
  at: timestamp,
  action: z.string(),
  result: z.enum(["success", "waiting", "failed", "stalled"]),
  reason: reason.optional(),
  durationMs: z.int().nonnegative(),
});

export const statusSchema = z.strictObject({
  cluster: z.string(),
  file: z.string().describe("the definition file, relative to the watched directory"),
  definitionRemoved: z
    .literal(true)
    .optional()
    .describe(
      "the definition file is gone while this status file stays: the cluster is being pruned, or its prune is held up (a node that does not answer) or refused (every definition gone at once); the file goes once the cluster is torn down",
    ),
  observedRevision: z.string(),
  gitCommit: z
    .string()
    .optional()
    .describe("the last commit that touched the definition file: what changed this cluster (absent outside a git repository or before the file is committed)"),
  gitHead: z
    .string()
    .optional()
    .describe(
      "the commit the daemon's checkout is at: HEAD of the repository holding the definitions directory when the daemon last read this definition (absent outside a git repository)",
    ),
  desired: z.enum(["running", "stopped"]),
  model: z.string().optional().describe("the definition's model id"),
  modelCommit: z
    .string()
    .optional()
    .describe(
      "the commit of the model the running processes were started from: the Hub commit its revision (a branch, unless pinned) resolved to when staged, or for a pushed folder a hash of its files (absent while nothing runs, and for a launch recorded before this was)",
    ),
  serving: z
    .object({ revision: z.string(), model: z.string() })
    .strict()
    .optional()
    .describe(
      "what runs when it is not the observed revision: an earlier revision that serves while the definition's is staged, refused (an invalid or unplannable definition) or not launched yet; its revision and model id",
    ),
  nodes: z
    .array(z.string())
    .optional()
    .describe("the definition's stage nodes in stage order, one pipeline stage each: how many stages the cluster has, whether or not it is planned or running"),
  health: z.enum(healthValues),
  conditions: z.array(conditionSchema),
  plan: planStatusSchema.optional(),
  staging: z.array(stagingStatusSchema),
  stages: z.array(stageCardSchema),
  coordinator: coordinatorStatusSchema.optional(),
  router: routerStatusSchema.optional(),
  timeline: z.array(timelineEventSchema),
  restarts: restartsSchema.optional(),
  lastError: z.strictObject({ reason, message: z.string(), at: timestamp }).optional(),
  history: z.array(passSchema).max(5),
});
export type ClusterStatus = z.infer<typeof statusSchema>;
