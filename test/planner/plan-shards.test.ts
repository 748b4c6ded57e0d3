import { describe, expect, it } from "vitest";
import { createRandom } from "../../src/planner/test-model/random.js";
import { mlxcelSplit } from "../../src/engines/mlxcel/index.js";
import { budgetOf, kvCacheBytes, nodeBudget, planShards, type PlanNode, type PlanOptions, type ShardPlan } from "../../src/planner/index.js";
import { syntheticProfile } from "./synthetic-profile.js";

const GiB = 1024 ** 3;
const equal: PlanOptions = { strategy: "equal", engine: "mlxcel", contextLength: 256, maxSequences: 1 };
const memory: PlanOptions = { strategy: "memory", engine: "reference", contextLength: 256, maxSequences: 1 };
const uniform = (layers: number, bytes = 1000): number[] => new Array<number>(layers).fill(bytes);
const nodes = (...gib: number[]): PlanNode[] => gib.map((g, i) => ({ name: `n${i}`, memoryBytes: g * GiB }));
const reasons = (messages: ShardPlan["errors"]): string[] => messages.map((m) => m.reason);

// Per layer KV of the synthetic profile: 2 × 2 kv heads × 16 head_dim × 2 bytes = 128 bytes per token.
const kvPerToken = 2 * 2 * 16 * 2;

describe("mlxcelSplit reproduces mlxcel's dense split", () => {
  it.each([
    [16, 2, [8, 8]],
    [27, 2, [14, 13]],
    [32, 3, [11, 11, 10]],
    [10, 4, [3, 3, 3, 1]],
    [30, 4, [8, 8, 8, 6]],
    [5, 4, [2, 2, 1, 0]],
  ])("%i layers over %i stages → %j", (layers, stages, counts) => {
    expect(mlxcelSplit(layers, stages)).toEqual(counts);
  });

  it("the equal plan uses those counts as half-open ranges", () => {
    const plan = planShards(syntheticProfile({ layerBytes: uniform(27) }), nodes(64, 64), equal);
    expect(plan.stages.map((s) => s.layers)).toEqual([
      [0, 14],
      [14, 27],
    ]);
    expect(plan.stages.map((s) => s.layerCount)).toEqual([14, 13]);
  });
});

describe("stage sizes", () => {
  it("weights count the embedding on the first stage, norm + lm_head on the last; KV per the formula", () => {
    const profile = syntheticProfile({ layerBytes: uniform(16, 1000), embeddingBytes: 5000, normBytes: 10, lmHeadBytes: 7000 });
    const plan = planShards(profile, nodes(64, 64), { ...equal, contextLength: 1000, maxSequences: 3 });
    const kvPerLayer = kvPerToken * 1024 * 3; // 1000 rounds up to 1024 tokens
    expect(plan.stages[0]).toMatchObject({ node: "n0", layers: [0, 8], weightBytes: 8000 + 5000, kvBytes: 8 * kvPerLayer, first: true, last: false });
    expect(plan.stages[1]).toMatchObject({ node: "n1", layers: [8, 16], weightBytes: 8000 + 10 + 7000, kvBytes: 8 * kvPerLayer, first: false, last: true });
    const s0 = plan.stages[0]!;
    expect(s0.totalBytes).toBe(s0.weightBytes + s0.kvBytes);
    expect(s0.budgetBytes).toBe(Math.floor((64 * GiB) / 1.2));
    expect(s0.fit).toBeCloseTo(s0.totalBytes / s0.budgetBytes!, 12);
    expect(plan.totals).toMatchObject({ layers: 16, stages: 2, weightBytes: 16000 + 5000 + 10 + 7000, kvBytes: 16 * kvPerLayer });
  });

  // Regression: mlxcel's equal-layer split was shown for a model whose layers differ (mlxcel
  // balances those by their bytes), with nothing saying the split, fit and files may be others.
  it("layers of unequal size under mlxcel: a SplitUnknown warning saying what to do; equal ones, none", () => {
    const mixed = syntheticProfile({ layerBytes: [1000, 1000, 5000, 5000, 5000, 5000] });
    const warned = planShards(mixed, nodes(64, 64), equal);
    expect(warned.errors).toEqual([]);
    expect(warned.warnings.map((w) => w.reason)).toContain("SplitUnknown");
    expect(warned.warnings.find((w) => w.reason === "SplitUnknown")!.message).toMatch(/layers differ in size .* set \[model\] files = "all"/);
    expect(planShards(syntheticProfile({ layerBytes: uniform(6) }), nodes(64, 64), equal).warnings.map((w) => w.reason)).not.toContain("SplitUnknown");
    expect(planShards(mixed, nodes(64, 64), { ...equal, engine: "reference" }).warnings.map((w) => w.reason)).not.toContain("SplitUnknown");
  });

  it("tied embeddings: the last stage also holds the embedding", () => {
    const profile = syntheticProfile({ layerBytes: uniform(4), embeddingBytes: 5000, lmHeadBytes: 0 });
    const plan = planShards(profile, nodes(64, 64), equal);
    expect(plan.stages[1]!.weightBytes).toBe(2000 + 10 + 5000);
    expect(plan.stages[0]!.weightBytes).toBe(2000 + 5000);
  });
});

describe("memory strategy", () => {
  it("splits in proportion to budgets on unequal nodes", () => {
    const profile = syntheticProfile({ layerBytes: uniform(30, 3 * GiB), embeddingBytes: 1, normBytes: 1, lmHeadBytes: 1 });
    const plan = planShards(profile, nodes(96, 48), memory);
    expect(plan.splitUsed).toBe("memory");
    expect(plan.stages.map((s) => s.layerCount)).toEqual([20, 10]);
    expect(plan.feasible).toBe(true);
    // The equal split would not fit the small node.
    const eq = planShards(profile, nodes(96, 48), { ...memory, strategy: "equal" });
    expect(reasons(eq.errors)).toEqual(["StageDoesNotFit"]);
  });

  it("is optimal: its largest fit equals brute force over every contiguous split (40 random small cases)", () => {
    const random = createRandom(42);
    for (let round = 0; round < 40; round++) {
      const layers = 3 + Math.floor(random() * 7);
      const stages = 2 + Math.floor(random() * Math.min(3, layers - 1));
      const layerBytes = Array.from({ length: layers }, () => Math.floor(1e6 + random() * 9e6));
      const embeddingBytes = 1 + Math.floor(random() * 8e6);
      const lmHeadBytes = 1 + Math.floor(random() * 8e6);
      const budgetsGiB = Array.from({ length: stages }, () => 0.01 + random() * 0.05);
      const profile = syntheticProfile({ layerBytes, embeddingBytes, normBytes: 100, lmHeadBytes });
      const plan = planShards(profile, nodes(...budgetsGiB), memory);

      // The cost of stage i holding [s, e), from the test's own inputs.
      const budgets = budgetsGiB.map((g) => Math.floor((g * GiB) / 1.2));
      const kvPerLayer = kvPerToken * 256;
      const fitOf = (i: number, s: number, e: number): number => {
        let bytes = 0;
        for (let l = s; l < e; l++) bytes += layerBytes[l]! + kvPerLayer;
        if (i === 0) bytes += embeddingBytes;
        if (i === stages - 1) bytes += 100 + lmHeadBytes;
        return bytes / budgets[i]!;
      };
      let best = Number.POSITIVE_INFINITY;
      const walk = (i: number, s: number, worst: number): void => {
        if (i === stages - 1) {
          best = Math.min(best, Math.max(worst, fitOf(i, s, layers)));
          return;
        }
        for (let e = s + 1; e <= layers - (stages - 1 - i); e++) walk(i + 1, e, Math.max(worst, fitOf(i, s, e)));
      };
      walk(0, 0, 0);

      expect(plan.stages.every((st) => st.layerCount >= 1)).toBe(true);
      expect(plan.stages.at(-1)!.layers[1]).toBe(layers);
      expect(plan.totals.maxFit!).toBeCloseTo(best, 12);
      expect(Math.max(...plan.stages.map((st) => fitOf(st.index, st.layers[0], st.layers[1])))).toBeCloseTo(best, 12);
    }
  });

  it("prefers nodes with more budget and keeps ≥ 1 layer per stage even on a tiny node", () => {
    const profile = syntheticProfile({ layerBytes: uniform(10, GiB) });
    const plan = planShards(profile, nodes(200, 200, 1), memory);
    const counts = plan.stages.map((s) => s.layerCount);
    expect(counts[2]).toBe(1);
    expect(Math.abs(counts[0]! - counts[1]!)).toBeLessThanOrEqual(1);
    expect(reasons(plan.errors)).toEqual(["StageDoesNotFit"]);
  });
});

describe("gates", () => {
  const profile = syntheticProfile({ layerBytes: uniform(16, GiB) });

  it("a clean two-node plan has no error and no warning", () => {
    const plan = planShards(profile, nodes(16, 16), equal);
    expect(plan.errors).toEqual([]);
    expect(plan.warnings).toEqual([]);
    expect(plan.feasible).toBe(true);
  });

  it("TooFewNodes: one node (still sized for the preview) and zero nodes", () => {
    const one = planShards(profile, nodes(64), equal);
    expect(reasons(one.errors)).toContain("TooFewNodes");
    expect(one.errors.find((e) => e.reason === "TooFewNodes")!.message).toBe("pipeline parallelism needs at least 2 nodes, got 1 (n0)");
    expect(one.stages).toHaveLength(1);
    expect(one.feasible).toBe(false);
    const none = planShards(profile, [], equal);
    expect(reasons(none.errors)).toEqual(["TooFewNodes"]);
    expect(none.stages).toEqual([]);
  });

  it("TooManyStages: more stages than layers", () => {
    const small = syntheticProfile({ layerBytes: uniform(3) });
    const plan = planShards(small, nodes(1, 1, 1, 1), memory);
    expect(reasons(plan.errors)).toEqual(["TooManyStages"]);
    expect(plan.errors[0]!.message).toBe("4 stages for 3 layers: every stage needs at least one layer");
  });

  it("EmptyStage: mlxcel's ceil split leaves a stage without layers (5 over 4); the memory split does not", () => {
    const five = syntheticProfile({ layerBytes: uniform(5) });
    const plan = planShards(five, nodes(1, 1, 1, 1), equal);
    expect(reasons(plan.errors)).toEqual(["EmptyStage"]);
    expect(plan.errors[0]!.message).toContain("(2, 2, 1, 0) leaves stage 3 without layers");
    expect(plan.stages[3]).toMatchObject({ layers: [5, 5], layerCount: 0 });
    // An engine that takes each stage's layers as planned (the reference engine) is pointed at the memory split.
    const reference = planShards(five, nodes(1, 1, 1, 1), { ...equal, engine: "reference" });
    expect(reference.errors[0]!.message).toMatch(
      /\(2, 2, 1, 0\) leaves stage 3 without layers; use fewer nodes, or \[plan\] strategy = "memory" \(this engine takes each stage's layers as planned\)$/,
    );
    expect(reasons(planShards(five, nodes(1, 1, 1, 1), memory).errors)).toEqual([]);
  });

  it("MixedAccelerators (unknown values are not compared)", () => {
    const mixed: PlanNode[] = [
      { name: "a", memoryBytes: 64 * GiB, accelerator: "apple-m2-ultra" },
      { name: "b", memoryBytes: 64 * GiB, accelerator: "cuda" },
      { name: "c", memoryBytes: 64 * GiB },
    ];
    const plan = planShards(profile, mixed, equal);
    expect(reasons(plan.errors)).toEqual(["MixedAccelerators"]);
    expect(plan.errors[0]!.message).toBe("nodes mix accelerator families (apple-m2-ultra on a; cuda on b); a cluster must be homogeneous");
    const same = mixed.map((n) => ({ ...n, accelerator: n.accelerator === undefined ? undefined : "cuda" }));
    expect(reasons(planShards(profile, same, equal).errors)).toEqual([]);
  });

  it("MixedEngineVersions", () => {
    const plan = planShards(
      profile,
      [
        { name: "a", memoryBytes: 64 * GiB, engineVersion: "0.9.1" },
        { name: "b", memoryBytes: 64 * GiB, engineVersion: "0.9.2" },
      ],
      equal,
    );
    expect(reasons(plan.errors)).toEqual(["MixedEngineVersions"]);
    expect(plan.errors[0]!.message).toContain("0.9.1 on a; 0.9.2 on b");
  });

  it("StageDoesNotFit says by how much and on which node", () => {
    // Stage 1: 8 GiB of layers + norm/lm_head + KV against 12 GiB / 1.2 = 10 GiB: fits. Stage 0 on 8 GiB: 6.67 GiB budget, short.
    const plan = planShards(
      profile,
      [
        { name: "big", memoryBytes: 12 * GiB },
        { name: "tiny", memoryBytes: 8 * GiB },
      ],
      equal,
    );
    expect(reasons(plan.errors)).toEqual(["StageDoesNotFit"]);
    const stage = plan.stages[1]!;
    const short = stage.totalBytes - stage.budgetBytes!;
    expect(short).toBeGreaterThan(GiB);
    expect(plan.errors[0]!.message).toBe(
      `stage 1 on node "tiny" (layers [8, 16)) needs 8.0 GiB (weights 8.0 GiB + KV 256.0 KiB) but its budget is 6.7 GiB (headroom 1.2): 1.3 GiB short`,
    );
    expect(stage.fit!).toBeGreaterThan(1);
  });

  it("StageDoesNotFit on a memory written without its unit says a bare number is a byte count", () => {
    const plan = planShards(
      profile,
      [
        { name: "big", memoryBytes: 12 * GiB },
        { name: "typo", memoryBytes: 64 },
      ],
      equal,
    );
    expect(reasons(plan.errors)).toEqual(["StageDoesNotFit"]);
    expect(plan.errors[0]!.message).toMatch(
      /^stage 1 on node "typo" .* short; its memory is 64 bytes \(64 B\), less than any node has: a bare number is a byte count, so a size needs its unit \(e\.g\. memory = "64GiB"\)$/,
    );
    // Written with a unit, but a small one: the example is a sane size, never the figure in GiB (256 TiB here).
    const small = planShards(
      profile,
      [
        { name: "big", memoryBytes: 12 * GiB },
        { name: "small", memoryBytes: 256 * 1024 },
      ],
      equal,
    );
    expect(small.errors[0]!.message).toMatch(/its memory is 262144 bytes \(256\.0 KiB\), less than any node has: .*\(e\.g\. memory = "64GiB"\)$/);
  });

  it("UnvalidatedModelFamily: error, or a warning when the definition opts in; mistral is validated", () => {
    const qwen = syntheticProfile({ layerBytes: uniform(16, GiB), config: { model_type: "qwen2" } });
    const refused = planShards(qwen, nodes(16, 16), equal);
    expect(reasons(refused.errors)).toEqual(["UnvalidatedModelFamily"]);
    expect(refused.errors[0]!.message).toBe(
      `model family "qwen2" is outside the validated Llama family (llama, mistral); set allow_unvalidated_family to plan it anyway`,
    );
    const allowed = planShards(qwen, nodes(16, 16), { ...equal, allowUnvalidatedFamily: true });
    expect(allowed.errors).toEqual([]);
    expect(reasons(allowed.warnings)).toEqual(["UnvalidatedModelFamily"]);
    const mistral = syntheticProfile({ layerBytes: uniform(16, GiB), config: { model_type: "mistral" } });
    expect(planShards(mistral, nodes(16, 16), equal).errors).toEqual([]);
  });

  it("MoreThanTwoStages is a warning", () => {
    const plan = planShards(profile, nodes(16, 16, 16), equal);
    expect(plan.errors).toEqual([]);
    expect(reasons(plan.warnings)).toEqual(["MoreThanTwoStages"]);
    expect(plan.feasible).toBe(true);
  });

  it("PipelineNotNeeded when one selected node fits weights + KV", () => {
    const plan = planShards(profile, nodes(16, 64), equal);
    expect(reasons(plan.warnings)).toEqual(["PipelineNotNeeded"]);
    expect(plan.warnings[0]!.message).toContain(`node "n1" alone fits the whole model`);
    expect(plan.warnings[0]!.message).toContain("pipeline parallelism is not needed");
    // KV counts: a long context on many sequences makes the single node too small.
    const busy = planShards(profile, nodes(16, 64), { ...equal, contextLength: 131072, maxSequences: 200 });
    expect(reasons(busy.warnings)).not.toContain("PipelineNotNeeded");
  });

  it("StrategyUnsupportedByEngine: memory with mlxcel (the preview shows mlxcel's own split)", () => {
    const plan = planShards(profile, nodes(30, 10), { ...memory, engine: "mlxcel" });
    expect(reasons(plan.errors)).toContain("StrategyUnsupportedByEngine");
    expect(plan.splitUsed).toBe("equal");
    expect(plan.stages.map((s) => s.layerCount)).toEqual([8, 8]);
  });

  it("NodeMemoryUnknown names the node and what to set", () => {
    const plan = planShards(profile, [{ name: "a", memoryBytes: 64 * GiB }, { name: "mystery" }], equal);
    expect(reasons(plan.errors)).toEqual(["NodeMemoryUnknown"]);
    expect(plan.errors[0]!.message).toBe(`node "mystery" has no known memory: set memory_limit (or a declared memory) in its registry entry, or let it be probed`);
    expect(plan.stages[1]).toMatchObject({ budgetBytes: null, fit: null });
    expect(plan.totals.maxFit).toBeNull();
  });

  it("a probe that gave no memory figure: the declared budget is used and said so (NodeMemoryNotProbed); with none declared, NodeMemoryUnknown says why", () => {
    const why = "probe exited with 1: sh: cannot open /proc/meminfo";
    const plan = planShards(
      profile,
      [
        { name: "a", memoryBytes: 64 * GiB },
        { name: "b", memoryBytes: 64 * GiB, memoryNotProbed: why },
      ],
      equal,
    );
    expect(reasons(plan.errors)).toEqual([]);
    expect(plan.stages[1]).toMatchObject({ budgetSource: "declared" });
    expect(plan.warnings.filter((w) => w.reason === "NodeMemoryNotProbed").map((w) => w.message)).toEqual([
      `node "b": its probe gave no memory figure (${why}): its budget is its declared memory, not what it has free`,
    ]);
    const unknown = planShards(
      profile,
      [
        { name: "a", memoryBytes: 64 * GiB },
        { name: "b", memoryNotProbed: why },
      ],
      equal,
    );
    expect(unknown.errors.map((e) => [e.reason, e.message])).toEqual([
      [
        "NodeMemoryUnknown",
        `node "b" has no known memory: its probe gave no memory figure (${why}), and its registry entry declares none: find why the probe fails there, or set memory_limit (or a declared memory) in its registry entry`,
      ],
    ]);
    expect(reasons(unknown.warnings)).not.toContain("NodeMemoryNotProbed");
  });

  it("DuplicateNode and InvalidPlanOptions", () => {
    const dup = planShards(
      profile,
      [
        { name: "a", memoryBytes: 64 * GiB },
        { name: "a", memoryBytes: 64 * GiB },
      ],
      equal,
    );
    expect(reasons(dup.errors)).toEqual(["DuplicateNode"]);
    const bad = planShards(profile, nodes(16, 16), { ...equal, contextLength: 0, headroom: 0.5 });
    expect(reasons(bad.errors)).toEqual(["InvalidPlanOptions", "InvalidPlanOptions"]);
  });

  // Its speed is measured by `npm run bench -- planner`, not asserted in a test.
  it("plans 126 layers over 30 nodes with the memory split", () => {
    const big = syntheticProfile({ layerBytes: uniform(126, 6 * GiB) });
    const many = Array.from({ length: 30 }, (_, i) => ({ name: `n${i}`, memoryBytes: (64 + (i % 4) * 64) * GiB }));
    const plan = planShards(big, many, memory);
    expect(plan.stages).toHaveLength(30);
  });
});

describe("nodeBudget", () => {
  it("takes the smallest known figure (probed free memory, declared memory, limit), divides by headroom", () => {
    expect(nodeBudget({ name: "a", memoryBytes: 120, availableBytes: 60 }, 1.2)).toBe(50);
    expect(nodeBudget({ name: "a", memoryBytes: 120, memoryLimitBytes: 96 }, 1.2)).toBe(80);
    expect(nodeBudget({ name: "a", availableBytes: 60, memoryLimitBytes: 120 })).toBe(50);
    expect(nodeBudget({ name: "a", memoryLimitBytes: 12 }, 1)).toBe(12);
    expect(nodeBudget({ name: "a" })).toBeUndefined();
  });

  // The one rule: declared memory caps what is probed, never the reverse.
  it("says which figure decided: declared, probed, probed capped by declared, or the memory limit", () => {
    expect(budgetOf({ name: "a", memoryBytes: 120 }, 1.2)).toEqual({ bytes: 100, source: "declared" });
    expect(budgetOf({ name: "a", availableBytes: 60 }, 1.2)).toEqual({ bytes: 50, source: "probed" });
    expect(budgetOf({ name: "a", memoryBytes: 120, availableBytes: 60 }, 1.2)).toEqual({ bytes: 50, source: "probed" });
    expect(budgetOf({ name: "a", memoryBytes: 60, availableBytes: 120 }, 1.2)).toEqual({ bytes: 50, source: "probed-capped-by-declared" });
    expect(budgetOf({ name: "a", memoryBytes: 60, availableBytes: 60 }, 1.2)).toEqual({ bytes: 50, source: "probed" });
    expect(budgetOf({ name: "a", memoryBytes: 120, availableBytes: 120, memoryLimitBytes: 60 }, 1.2)).toEqual({ bytes: 50, source: "memory-limit" });
    expect(budgetOf({ name: "a" })).toBeUndefined();
  });
});

describe("kvCacheBytes", () => {
  it("2 × kv_heads × head_dim × ctx (rounded up to 256) × element bytes × sequences", () => {
    const profile = syntheticProfile({ layerBytes: uniform(4) });
    expect(kvCacheBytes(profile, { contextLength: 1 })).toBe(4 * kvPerToken * 256);
    expect(kvCacheBytes(profile, { contextLength: 256 })).toBe(4 * kvPerToken * 256);
    expect(kvCacheBytes(profile, { contextLength: 257, maxSequences: 4 })).toBe(4 * kvPerToken * 512 * 4);
    expect(kvCacheBytes(profile, { contextLength: 8192, layers: [1, 3] })).toBe(2 * kvPerToken * 8192);
  });

  it("uses head_dim from config and f32 elements", () => {
    const profile = syntheticProfile({ layerBytes: uniform(2), config: { head_dim: 128, num_attention_heads: 8, num_key_value_heads: 8, torch_dtype: "float32" } });
    // U8 synthetic tensors carry no float dtype: torch_dtype decides (4 bytes).
    expect(profile.kvBytesPerElement).toBe(4);
    expect(kvCacheBytes(profile, { contextLength: 4096 })).toBe(2 * (2 * 8 * 128 * 4096 * 4));
  });

  it("sliding-window layers are bounded by the window (all layers, or those listed in layer_types)", () => {
    const mistral = syntheticProfile({ layerBytes: uniform(2), config: { model_type: "mistral", sliding_window: 4096 } });
    expect(kvCacheBytes(mistral, { contextLength: 32768 })).toBe(2 * kvPerToken * 4096);
    expect(kvCacheBytes(mistral, { contextLength: 1000 })).toBe(2 * kvPerToken * 1024);
    const mixed = syntheticProfile({ layerBytes: uniform(2), config: { sliding_window: 512, layer_types: ["sliding_attention", "full_attention"] } });
    expect(kvCacheBytes(mixed, { contextLength: 8192 })).toBe(kvPerToken * 512 + kvPerToken * 8192);
    const off = syntheticProfile({ layerBytes: uniform(2), config: { sliding_window: 512, use_sliding_window: false } });
    expect(kvCacheBytes(off, { contextLength: 8192 })).toBe(2 * kvPerToken * 8192);
  });
});

describe("stages that share a machine", () => {
  const shared = syntheticProfile({ layerBytes: uniform(8, GiB) });
  const on = (...machines: string[]): PlanNode[] => machines.map((machine, i) => ({ name: `n${i}`, memoryBytes: 64 * GiB, machine }));

  it("StagesShareMachine notes each machine running several stages, and how the reference engine divides its cores", () => {
    const plan = planShards(shared, on("local", "local", "10.0.0.2"), { ...equal, engine: "reference" });
    expect(plan.feasible).toBe(true);
    const notes = plan.warnings.filter((w) => w.reason === "StagesShareMachine");
    expect(notes.map((n) => n.message)).toEqual([
      "stages 0 (n0), 1 (n1) run on this machine and share its cores: shard-engine gives each of them its machine's cores ÷ the stages it runs (--threads, at least 1), so together they use every core once",
    ]);
  });

  it("no note for stages on machines of their own; mlxcel's note names no thread rule", () => {
    expect(reasons(planShards(shared, on("10.0.0.1", "10.0.0.2"), equal).warnings)).not.toContain("StagesShareMachine");
    const mlxcel = planShards(shared, on("studio", "studio"), equal).warnings.filter((w) => w.reason === "StagesShareMachine");
    expect(mlxcel.map((n) => n.message)).toEqual(["stages 0 (n0), 1 (n1) run on one machine (studio) and share its cores"]);
  });
});
