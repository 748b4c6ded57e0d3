import { engineOf, selectKinds } from "../engines/index.js";
import { quoteText, showText, type PlannerReason } from "../errors/index.js";
import { formatBytes } from "./format-bytes.js";
import { layerKvBytes } from "./kv-cache.js";
import { memorySplit } from "./memory-split.js";
import type { ModelProfile } from "./model-profile.js";
import { budgetOf, nodeBudget, type PlanNode } from "./node-budget.js";
import type { PlanMessage, PlanOptions, ShardPlan, StagePlan } from "./plan-types.js";

/**
 * The shard plan: a pure function of the model profile, the nodes in stage order and the options.
 * Never throws on an infeasible input: every problem is an error (or warning) of the plan, so a
 * preview shows all of them at once.
 */
export function planShards(profile: ModelProfile, nodes: readonly PlanNode[], options: PlanOptions): ShardPlan {
  const o = resolveOptions(options);
  const errors: PlanMessage[] = [];
  const warnings: PlanMessage[] = [];
  const error = (reason: PlannerReason, message: string): void => void errors.push({ reason, message });
  const warn = (reason: PlannerReason, message: string): void => void warnings.push({ reason, message });
  const n = nodes.length;
  const L = profile.layers;
  const engine = engineOf(o.engine);

  // Check the options and the topology.
  if (!Number.isSafeInteger(o.contextLength) || o.contextLength < 1) error("InvalidPlanOptions", `context length must be a positive integer, got ${o.contextLength}`);
  if (!Number.isSafeInteger(o.maxSequences) || o.maxSequences < 1) error("InvalidPlanOptions", `max sequences must be a positive integer, got ${o.maxSequences}`);
  if (!Number.isFinite(o.headroom) || o.headroom < 1) error("InvalidPlanOptions", `headroom must be a number ≥ 1, got ${o.headroom}`);
  if (n < 2) error("TooFewNodes", `pipeline parallelism needs at least 2 nodes, got ${n}${n === 1 ? ` (${nodes[0]?.name})` : ""}`);
  if (n > engine.stageCount.validatedUpTo) warn("MoreThanTwoStages", `${n} stages: ${engine.stageCount.advice}`);
  const duplicates = nodes.map((x) => x.name).filter((name, i, all) => all.indexOf(name) !== i);
  if (duplicates.length > 0)
    error("DuplicateNode", `node ${[...new Set(duplicates)].map((d) => `"${d}"`).join(", ")} appears more than once; each stage needs its own node`);
  if (n > L) error("TooManyStages", `${n} stages for ${L} layers: every stage needs at least one layer`);
  noteSharedMachines(nodes, engine.sharedMachineCores, (message) => warn("StagesShareMachine", message));

  // Check the cluster is homogeneous (where the figures are known).
  checkUniform(nodes, "accelerator", (values) => error("MixedAccelerators", `nodes mix accelerator families (${values}); a cluster must be homogeneous`));
  checkUniform(nodes, "engineVersion", (values) => error("MixedEngineVersions", mixedEngineVersions(values)));

  // Check the model family and the strategy against the engine.
  const validated = engine.modelFamilies;
  if (!validated.families.includes(profile.family) && validated.only === true) {
    error(
      "ModelFamilyUnsupported",
      `${engine.name} cannot serve model family ${quoteText(profile.family)} in pipeline mode; the ${validated.name}: ${validated.families.join(", ")}`,
    );
  } else if (!validated.families.includes(profile.family)) {
    const message = `model family ${quoteText(profile.family)} is outside the validated ${validated.name} (${validated.families.join(", ")})`;
    if (o.allowUnvalidatedFamily) warn("UnvalidatedModelFamily", `${message}; planned because the definition opts in`);
    else error("UnvalidatedModelFamily", `${message}; set allow_unvalidated_family to plan it anyway`);
  }
  if (engine.needsWeightIndex === true && !profile.indexed) {
    error(
      "ModelIndexMissing",
      `${engine.name} finds each rank's files through model.safetensors.index.json, which this model does not have (its weights are one model.safetensors): ` +
        `write the index beside it (a weight_map naming model.safetensors for every tensor), or serve the model with another engine`,
    );
  }
  if (profile.tokenizer === "missing") {
    error(
      "ModelTokenizerMissing",
      `${profile.source} has no tokenizer (neither tokenizer.json nor tokenizer.model beside config.json), so no engine can turn a prompt into tokens: ` +
        (profile.source.startsWith("hub:")
          ? "add the model's tokenizer files (tokenizer.json, tokenizer_config.json) to the repository, or serve a revision that has them"
          : "copy the model's tokenizer files (tokenizer.json, tokenizer_config.json) from where it came from"),
    );
  }
  if (o.strategy === "memory" && !engine.acceptsExplicitLayers) {
    const able = selectKinds((e) => e.acceptsExplicitLayers).join(" or ");
    error(
      "StrategyUnsupportedByEngine",
      `strategy "memory" needs the ${able} engine: ${engine.name} computes its own equal split and cannot be told another (use strategy "equal")`,
    );
  }

  // Budgets.
  const sourced = nodes.map((node) => budgetOf(node, o.headroom));
  const budgets = sourced.map((b) => b?.bytes);
  for (const [i, node] of nodes.entries()) {
    const unprobed = node.memoryNotProbed === undefined ? undefined : `its probe gave no memory figure (${node.memoryNotProbed})`;
    if (budgets[i] === undefined) {
      error(
        "NodeMemoryUnknown",
        unprobed === undefined
          ? `node "${node.name}" has no known memory: set memory_limit (or a declared memory) in its registry entry, or let it be probed`
          : `node "${node.name}" has no known memory: ${unprobed}, and its registry entry declares none: find why the probe fails there, or set memory_limit (or a declared memory) in its registry entry`,
      );
    } else if (unprobed !== undefined) {
      // Said, not failed: the declared figure is the operator's own word, and planning on it is what
      // a plan without --probe does; but a budget the daemon means to probe must not pass for probed.
      warn("NodeMemoryNotProbed", `node "${node.name}": ${unprobed}: its budget is its declared memory, not what it has free`);
    }
  }
  const knownBudgets = budgets.every((b): b is number => b !== undefined) ? budgets : undefined;

  // Split the layers.
  const kv = layerKvBytes(profile, Math.max(1, o.contextLength), Math.max(1, o.maxSequences));
  const tied = profile.config.tieWordEmbeddings || profile.lmHeadBytes === 0;
  const lastExtra = profile.normBytes + profile.lmHeadBytes + (tied && n > 1 ? profile.embeddingBytes : 0);
  let counts: number[] = [];
  let splitUsed: PlanOptions["strategy"] = "equal";
  if (n >= 1 && n <= L) {
    if (o.strategy === "memory" && engine.acceptsExplicitLayers && knownBudgets !== undefined) {
      const layerCost = profile.layerBytes.map((w, i) => w + (kv[i] ?? 0));
      counts = memorySplit({ layerCost, budgets: knownBudgets, firstExtra: profile.embeddingBytes, lastExtra });
      splitUsed = "memory";
    } else {
      counts = engine.ownSplit.countLayers(L, n);
      const sizes = profile.layerBytes.filter((b) => b > 0);
      const unequal = sizes.length > 0 && Math.max(...sizes) > 1.05 * Math.min(...sizes);
      if (engine.ownSplit.equalLayersOnly !== undefined && unequal) {
        warn(
          "SplitUnknown",
          `this model's layers differ in size (${formatBytes(Math.min(...sizes))} to ${formatBytes(Math.max(...sizes))}) and ${engine.ownSplit.equalLayersOnly}: ` +
            `the split, fit and per-stage files shown are the equal-layer rule's; set [model] files = "all" so that every node holds every file, and leave memory to spare`,
        );
      }
    }
    const empty = counts.flatMap((c, i) => (c <= 0 ? [i] : []));
    if (empty.length > 0) {
      error(
        "EmptyStage",
        `${engine.ownSplit.name} of ${L} layers over ${n} stages (${counts.join(", ")}) leaves stage ${empty.join(", ")} without layers; use fewer nodes${engine.acceptsExplicitLayers ? ', or [plan] strategy = "memory" (this engine takes each stage\'s layers as planned)' : ""}`,
      );
    }
  }

  // Size each stage.
  const stages: StagePlan[] = [];
  let start = 0;
  for (const [i, count] of counts.entries()) {
    const end = start + Math.max(0, count);
    const first = i === 0;
    const last = i === counts.length - 1;
    let weightBytes = sum(profile.layerBytes, start, end);
    if (engine.nonLayerTensors === "every-stage") weightBytes += profile.embeddingBytes + profile.normBytes + profile.lmHeadBytes + profile.otherBytes;
    else {
      if (first) weightBytes += profile.embeddingBytes;
      if (last) weightBytes += lastExtra;
    }
    const kvBytes = sum(kv, start, end);
    const totalBytes = weightBytes + kvBytes;
    const budget = budgets[i];
    const node = nodes[i]!;
    stages.push({
      index: i,
      node: node.name,
      layers: [start, end],
      layerCount: end - start,
      ...(engine.rankOfStage === undefined ? {} : { rank: engine.rankOfStage(i, counts.length) }),
      first,
      last,
      weightBytes,
      kvBytes,
      totalBytes,
      budgetBytes: budget ?? null,
      budgetSource: sourced[i]?.source ?? null,
      fit: budget === undefined ? null : budget > 0 ? totalBytes / budget : Number.POSITIVE_INFINITY,
    });
    if (budget !== undefined && totalBytes > budget) {
      error(
        "StageDoesNotFit",
        `stage ${i} on node "${node.name}" (layers [${start}, ${end})) needs ${formatBytes(totalBytes)} ` +
          `(weights ${formatBytes(weightBytes)} + KV ${formatBytes(kvBytes)}) but its budget is ${formatBytes(budget)} ` +
          `(headroom ${o.headroom}): ${formatBytes(totalBytes - budget)} short${unitHint(node)}`,
      );
    }
    start = end;
  }

  // Warn when one selected node could hold everything.
  const modelBytes = profile.layerBytes.reduce((a, b) => a + b, 0) + profile.embeddingBytes + profile.normBytes + profile.lmHeadBytes;
  const wholeBytes = modelBytes + kv.reduce((a, b) => a + b, 0);
  const roomy = nodes.find((_, i) => budgets[i] !== undefined && wholeBytes <= budgets[i]!);
  if (roomy !== undefined && n >= 2) {
    warn(
      "PipelineNotNeeded",
      `node "${roomy.name}" alone fits the whole model (${formatBytes(wholeBytes)} with KV, budget ${formatBytes(nodeBudget(roomy, o.headroom) ?? 0)}): pipeline parallelism is not needed`,
    );
  }

  const fits = stages.map((s) => s.fit);
  return {
    feasible: errors.length === 0,
    strategy: o.strategy,
    splitUsed,
    engine: o.engine,
    model: {
      source: profile.source,
      family: profile.family,
      layers: L,
      dtype: profile.dtype,
      quantizationBits: profile.config.quantization?.bits ?? null,
    },
    options: o,
    stages,
    warnings,
    errors,
    totals: {
      layers: L,
      stages: stages.length,
      weightBytes: stages.reduce((a, s) => a + s.weightBytes, 0),
      kvBytes: stages.reduce((a, s) => a + s.kvBytes, 0),
      totalBytes: stages.reduce((a, s) => a + s.totalBytes, 0),
      budgetBytes: knownBudgets === undefined ? null : knownBudgets.reduce((a, b) => a + b, 0),
      maxFit: fits.length === 0 || fits.some((f) => f === null) ? null : Math.max(...(fits as number[])),
    },
  };
}

function resolveOptions(options: PlanOptions): Required<PlanOptions> {
  const { strategy, contextLength, engine, headroom = engineOf(engine).memoryHeadroom, maxSequences = 1, allowUnvalidatedFamily = false } = options;
  return { strategy, headroom, contextLength, maxSequences, engine, allowUnvalidatedFamily };
}

/** Note each machine that runs several stages: they share its cores (how, the engine says). */
function noteSharedMachines(nodes: readonly PlanNode[], how: string | undefined, note: (message: string) => void): void {
  const stagesOn = new Map<string, number[]>();
  nodes.forEach((node, i) => {
    if (node.machine !== undefined) stagesOn.set(node.machine, [...(stagesOn.get(node.machine) ?? []), i]);
  });
  for (const [machine, stages] of stagesOn) {
    if (stages.length < 2) continue;
    const which = stages.map((i) => `${i} (${nodes[i]?.name})`).join(", ");
    const where = machine === "local" ? "this machine" : `one machine (${machine})`;
    note(`stages ${which} run on ${where} and share its cores${how === undefined ? "" : `: ${how}`}`);
  }
}

function checkUniform(nodes: readonly PlanNode[], key: "accelerator" | "engineVersion", report: (values: string) => void): void {
  const values = describeMixed(nodes.map((node) => ({ name: node.name, value: node[key] })));
  if (values !== undefined) report(values);
}

/**
 * Nodes by the value each reports, "v1 on a, b; v2 on c" (values shown as text), or undefined
 * unless two of them differ. A node whose value is unknown is not compared.
 */
export function describeMixed(nodes: ReadonlyArray<{ name: string; value: string | undefined }>): string | undefined {
  const seen = new Map<string, string[]>();
  for (const { name, value } of nodes) if (value !== undefined) seen.set(value, [...(seen.get(value) ?? []), name]);
  return seen.size > 1 ? [...seen].map(([v, names]) => `${showText(v)} on ${names.join(", ")}`).join("; ") : undefined;
}

/** MixedEngineVersions's message, for `values` as describeMixed gives them. */
export function mixedEngineVersions(values: string): string {
  return `nodes run different engine versions (${values}); a cluster must run one version`;
}

function sum(values: readonly number[], start: number, end: number): number {
  let total = 0;
  for (let i = start; i < end; i++) total += values[i] ?? 0;
  return total;
}

/**
 * A hint for a registry figure that is surely a size written without its unit: `memory = 64`
 * is 64 bytes (a bare number is a byte count), and no node has less than a mebibyte.
 */
function unitHint(node: PlanNode): string {
  const tiny = (
    [
      ["memory", node.memoryBytes],
      ["memory_limit", node.memoryLimitBytes],
    ] as const
  ).find(([, bytes]) => bytes !== undefined && bytes < 2 ** 20);
  return tiny === undefined
    ? ""
    : `; its ${tiny[0]} is ${tiny[1]} bytes (${formatBytes(tiny[1]!)}), less than any node has: a bare number is a byte count, so a size needs its unit (e.g. ${tiny[0]} = "64GiB")`;
}
