/**
 * Plan one cluster definition: resolve where its model can be inspected (the Hub by HTTP Range
 * reads, or a local directory), read the profile, and plan the stages over its registry nodes.
 * Budgets: what the nodes report when the caller probed them, capped by the registry's declared
 * memory; the declared memory alone otherwise.
 */
import { canRunOn, engineOf, quoteKinds, selectKindsRunningOn } from "../engines/index.js";
import type { ClusterSpec, Settings } from "../spec/index.js";
import { quoteText, ShardctlError } from "../errors/index.js";
import { checkModelFormat } from "./check-model-format.js";
import { inspectModel } from "./inspect-model.js";
import type { ModelProfile } from "./model-profile.js";
import type { ModelSource } from "./model-source.js";
import type { PlanNode } from "./node-budget.js";
import { describeMixed, mixedEngineVersions, planShards } from "./plan-shards.js";
import type { ShardPlan } from "./plan-types.js";

/** What probes reported of a node, when known. */
export interface NodeFacts {
  totalBytes?: number;
  availableBytes?: number;
  accelerator?: string;
  engineVersion?: string;
  /** Why the node's probe gave no memory figure, when it was probed and did not (a probe that timed out or failed). */
  memoryNotProbed?: string;
}

export interface ClusterPlan {
  profile: ModelProfile;
  plan: ShardPlan;
}

/** Where the planner reads the model from, without downloading any weights. */
export function modelSourceOf(spec: ClusterSpec, settings: Settings, env: NodeJS.ProcessEnv = process.env): ModelSource {
  if (spec.model.source === "hub") {
    const token = env[settings.hub.tokenEnv];
    return {
      kind: "hub",
      endpoint: settings.hub.endpoint,
      repo: spec.model.id,
      revision: spec.model.revision,
      ...(token === undefined || token === "" ? {} : { token }),
    };
  }
  const path = spec.model.path;
  if (path === undefined || path.startsWith("~/")) {
    throw new ShardctlError(
      "ModelNotInspectable",
      `${spec.file}: model.id "${spec.model.id}" is a path on the nodes that the control machine cannot read; ` + 'plan from a local copy (source = "push") or a Hub id',
      { terminal: true },
    );
  }
  return { kind: "dir", path };
}

/**
 * The plan nodes of a cluster, in stage order, from the registry and any probe facts. Both memory
 * figures go to the plan, which budgets with the smaller (`budgetOf`): what a node reports (its
 * free memory, or its total when it reports no free figure) capped by what the registry declares.
 * Every caller — `shardctl plan`, `plan --probe` and the daemon — goes through here, so all three
 * apply that one rule.
 */
export function planNodesOf(spec: ClusterSpec, settings: Settings, facts: Readonly<Record<string, NodeFacts>> = {}): PlanNode[] {
  return spec.nodes.map((name) => {
    const entry = settings.nodes[name];
    const fact = facts[name] ?? {};
    const probedBytes = fact.availableBytes ?? fact.totalBytes;
    const accelerator = fact.accelerator ?? entry?.accelerator;
    const engineVersion = fact.engineVersion ?? entry?.engineVersion;
    return {
      name,
      ...(entry?.memory === undefined ? {} : { memoryBytes: entry.memory }),
      ...(probedBytes === undefined ? {} : { availableBytes: probedBytes }),
      ...(entry?.memoryLimit === undefined ? {} : { memoryLimitBytes: entry.memoryLimit }),
      ...(accelerator === undefined ? {} : { accelerator }),
      ...(engineVersion === undefined ? {} : { engineVersion }),
      ...(entry === undefined ? {} : { machine: entry.host }),
      ...(fact.memoryNotProbed === undefined || probedBytes !== undefined ? {} : { memoryNotProbed: fact.memoryNotProbed }),
    };
  });
}

/** Inspect the model of `spec` and plan it. Throws only when the model cannot be read. */
export async function planCluster(
  spec: ClusterSpec,
  settings: Settings,
  facts: Readonly<Record<string, NodeFacts>> = {},
  /** Inspect this Hub commit (one the caller pinned, with the files it lists) instead of the definition's branch. */
  pinned?: { commit: string; files: readonly string[] },
): Promise<ClusterPlan> {
  const source = modelSourceOf(spec, settings);
  const profile = await inspectModel(source.kind === "hub" && pinned !== undefined ? { ...source, revision: pinned.commit, files: pinned.files } : source);
  const plan = planShards(profile, planNodesOf(spec, settings, facts), {
    strategy: spec.plan.strategy,
    headroom: spec.plan.headroom,
    contextLength: spec.model.contextLength,
    maxSequences: spec.model.maxSequences,
    engine: spec.engine.kind,
    allowUnvalidatedFamily: spec.plan.allowUnvalidatedFamily,
  });
  const versioned = gateEngineVersion(gateCoordinatorVersion(plan, spec, facts), spec, facts);
  return { profile, plan: gateModelFormat(gateSplitDefect(gateEngineAccelerator(versioned, spec, facts), spec, facts), profile, spec) };
}

/** A model the engine's loader cannot read (its facts' modelFormat): refused here, not at every launch. */
function gateModelFormat(plan: ShardPlan, profile: ModelProfile, spec: ClusterSpec): ShardPlan {
  const errors = checkModelFormat(profile, engineOf(spec.engine.kind));
  if (errors.length === 0) return plan;
  return { ...plan, feasible: false, errors: [...plan.errors, ...errors] };
}

/**
 * An engine version whose own split runs some layers twice or never (mlx-lm before 0.32.0 on an
 * uneven split): refused, naming the version and the layers, for the probed or declared version.
 */
function gateSplitDefect(plan: ShardPlan, spec: ClusterSpec, facts: Readonly<Record<string, NodeFacts>>): ShardPlan {
  const defect = engineOf(spec.engine.kind).splitDefect;
  if (defect === undefined || plan.splitUsed === "memory") return plan;
  const versions = new Set([
    ...spec.nodes.flatMap((n) => (facts[n]?.engineVersion === undefined ? [] : [facts[n]!.engineVersion!])),
    ...(spec.engine.version === undefined ? [] : [spec.engine.version]),
  ]);
  const message = [...versions].map((v) => defect(v, plan.model.layers, plan.stages.length)).find((m) => m !== undefined);
  if (message === undefined) return plan;
  return { ...plan, feasible: false, errors: [...plan.errors, { reason: "EngineSplitDefect", message }] };
}

/** An engine that runs on some accelerators only: a node probed as another cannot take a stage. */
function gateEngineAccelerator(plan: ShardPlan, spec: ClusterSpec, facts: Readonly<Record<string, NodeFacts>>): ShardPlan {
  const engine = engineOf(spec.engine.kind);
  if (engine.runsOn === undefined) return plan;
  const other = spec.nodes.flatMap((node) => {
    const accelerator = facts[node]?.accelerator;
    return accelerator === undefined || canRunOn(engine, accelerator) ? [] : [{ node, accelerator }];
  });
  if (other.length === 0) return plan;
  const instead = selectKindsRunningOn(other.map((o) => o.accelerator));
  const hint = instead.length === 0 ? "use other nodes" : `use [engine] kind = ${quoteKinds(instead)} or other nodes`;
  const message = `${engine.name} runs on ${engine.runsOn.name} only; ${other.map((o) => `${o.node} reports ${o.accelerator}`).join(", ")}: ${hint}`;
  return { ...plan, feasible: false, errors: [...plan.errors, { reason: "EngineUnsupportedOnNode", message }] };
}

/**
 * The nodes an engine process runs on, in stage order, then the coordinator's when facts say its
 * engine's version there (only when its engine serves there apart from the stages).
 */
function engineNodesOf(spec: ClusterSpec, facts: Readonly<Record<string, NodeFacts>>): string[] {
  const coordinator = spec.coordinator.node;
  return [...new Set(spec.nodes)].concat(!spec.nodes.includes(coordinator) && facts[coordinator]?.engineVersion !== undefined ? [coordinator] : []);
}

/**
 * The coordinator's node runs another engine version than the stage nodes, which agree among
 * themselves (when they do not, the plan says so already): a pipeline of mixed versions breaks on
 * frames one side does not read, which may be only some prompts' (a long one, say), so it is
 * refused as the stages' own mix is.
 */
function gateCoordinatorVersion(plan: ShardPlan, spec: ClusterSpec, facts: Readonly<Record<string, NodeFacts>>): ShardPlan {
  const nodes = engineNodesOf(spec, facts);
  const coordinator = spec.coordinator.node;
  if (!nodes.includes(coordinator) || spec.nodes.includes(coordinator)) return plan;
  const stageVersions = new Set(spec.nodes.flatMap((n) => (facts[n]?.engineVersion === undefined ? [] : [facts[n]!.engineVersion!])));
  const own = facts[coordinator]!.engineVersion!;
  if (stageVersions.size !== 1 || stageVersions.has(own)) return plan;
  const values = describeMixed(nodes.map((n) => ({ name: n === coordinator ? `${n} (the coordinator's)` : n, value: facts[n]?.engineVersion })))!;
  return { ...plan, feasible: false, errors: [...plan.errors, { reason: "MixedEngineVersions", message: mixedEngineVersions(values) }] };
}

/** `[engine] version`: every node whose engine reports a version must report that one (the coordinator's too). */
function gateEngineVersion(plan: ShardPlan, spec: ClusterSpec, facts: Readonly<Record<string, NodeFacts>>): ShardPlan {
  const expected = spec.engine.version;
  if (expected === undefined) return plan;
  const wrong = engineNodesOf(spec, facts).filter((n) => {
    const reported = facts[n]?.engineVersion;
    return reported !== undefined && !reported.split(/\s+/).includes(expected);
  });
  if (wrong.length === 0) return plan;
  const message = `[engine] version = ${quoteText(expected)} but ${wrong.map((n) => `${n} reports ${quoteText(facts[n]!.engineVersion)}`).join(", ")}: install ${quoteText(expected)} there or change the expected version`;
  return { ...plan, feasible: false, errors: [...plan.errors, { reason: "EngineVersionMismatch", message }] };
}
