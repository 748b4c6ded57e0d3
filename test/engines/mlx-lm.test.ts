/**
 * The mlx-lm engine kind's own rules, without running it (test/mlx-lm runs it for real): its
 * reversed split, ring hostfile and start order, the command line of a rank, the plan (every rank
 * keeps the non-layer tensors; only pipelined families), and what a definition may not say.
 */
import { describe, expect, it } from "vitest";
import { createDriver, engineOf, type EngineTopology } from "../../src/engines/index.js";
import { describeSplitDefect, mlxLmSplit, renderRingHostfile, ringNeighbourUnreachableIn, ringStartOrder } from "../../src/engines/mlx-lm/index.js";
import { filesForStage, planShards, type PlanNode } from "../../src/planner/index.js";
import { formatIssue, parseCluster, parseSettings } from "../../src/spec/index.js";
import { syntheticProfile } from "../planner/synthetic-profile.js";

const GiB = 1024 ** 3;

describe("mlx-lm's split, read in layer order", () => {
  // Rank r takes ⌊L/N⌋, one more when r < L mod N; stage s is rank N-1-s, so the extras sit at the end.
  it.each([
    [4, 2, [2, 2]],
    [61, 2, [30, 31]],
    [10, 3, [3, 3, 4]],
    [11, 3, [3, 4, 4]],
    [2, 3, [0, 1, 1]],
  ])("%i layers over %i ranks → %j", (layers, stages, counts) => {
    expect(mlxLmSplit(layers, stages)).toEqual(counts);
    expect(counts.reduce((a, b) => a + b, 0)).toBe(layers);
  });
});

const topology: EngineTopology = {
  cluster: "ring",
  modelName: "qwen",
  maxSequences: 1,
  transport: "tcp",
  coordinator: { id: "coordinator", address: { host: "10.0.0.3", port: 8080 }, http: { host: "10.0.0.3", port: 8080 } },
  stages: [
    { index: 0, id: "stage-0", address: { host: "10.0.0.1", port: 40000 }, layers: [0, 10] },
    { index: 1, id: "stage-1", address: { host: "10.0.0.2", port: 40001 }, layers: [10, 20] },
    { index: 2, id: "stage-2", address: { host: "10.0.0.3", port: 40002 }, layers: [20, 30] },
  ],
  explicitLayers: false,
};

describe("the ring", () => {
  it("hostfile: one entry per rank in rank order, the last stage first", () => {
    expect(JSON.parse(renderRingHostfile(topology))).toEqual([["10.0.0.3:40002"], ["10.0.0.2:40001"], ["10.0.0.1:40000"]]);
  });

  it("start order: every accepting rank (0..N-2, the later stages) first, then rank N-1 (stage 0)", () => {
    expect(ringStartOrder(topology)).toEqual([[2, 1], [0]]);
  });

  it("a rank's command line: the ring's environment, the absolute model path, rank 0's HTTP address", () => {
    const driver = createDriver("mlx-lm", { extraArgs: ["--max-tokens", "64"], python: "/opt/mlx/bin/python" });
    const files = { modelDir: "/models/qwen", clusterConfig: "/run/ring/hostfile.json", tokenFile: "/run/ring/transport.token", cacheDir: "/run/ring/cache" };
    expect(driver.clusterConfigName).toBe("hostfile.json");
    expect(driver.stageArgv(topology, topology.stages[0]!, files)).toEqual([
      "env",
      "MLX_RANK=2",
      "MLX_HOSTFILE=/run/ring/hostfile.json",
      "MLX_RING_VERBOSE=1",
      "HF_HUB_OFFLINE=1",
      "HF_HUB_CACHE=./cache",
      "PYTHONUNBUFFERED=1",
      "/opt/mlx/bin/python",
      "-m",
      "mlx_lm.server",
      "--model",
      "/models/qwen",
      "--pipeline",
      "--host",
      "10.0.0.3",
      "--port",
      "8080",
      "--decode-concurrency",
      "1",
      "--prompt-concurrency",
      "1",
      "--max-tokens",
      "64",
    ]);
    // HF_HUB_CACHE is relative to the run directory the rank starts in (huggingface_hub expands $NAME
    // in it); a cache directory elsewhere is passed whole.
    expect(driver.stageArgv(topology, topology.stages[0]!, { ...files, cacheDir: "/var/cache/hf" })).toContain("HF_HUB_CACHE=/var/cache/hf");
    // Prefill is held to mlx-lm's own 8 when max_sequences is larger.
    const sixteen = driver.stageArgv({ ...topology, maxSequences: 16 }, topology.stages[0]!, files);
    expect(sixteen.slice(sixteen.indexOf("--decode-concurrency"), sixteen.indexOf("--decode-concurrency") + 4)).toEqual([
      "--decode-concurrency",
      "16",
      "--prompt-concurrency",
      "8",
    ]);
    expect(() => driver.coordinatorArgv(topology, files)).toThrow(/no coordinator process/);
    expect(driver.versionArgv()).toEqual(["/opt/mlx/bin/python", "-c", expect.stringContaining("mlx_lm.__version__")]);
  });
});

describe("planning for mlx-lm", () => {
  const nodes: PlanNode[] = [
    { name: "a", memoryBytes: 64 * GiB },
    { name: "b", memoryBytes: 64 * GiB },
  ];
  const options = { strategy: "equal", engine: "mlx-lm", contextLength: 256, maxSequences: 1 } as const;

  it("every rank counts the embedding, final norm and lm_head; stages say their rank", () => {
    const profile = syntheticProfile({
      layerBytes: new Array<number>(5).fill(1000),
      embeddingBytes: 5000,
      normBytes: 10,
      lmHeadBytes: 7000,
      config: { model_type: "qwen2" },
    });
    const plan = planShards(profile, nodes, options);
    expect(plan.errors).toEqual([]);
    expect(plan.stages.map((s) => [s.layers, s.rank, s.weightBytes])).toEqual([
      [[0, 2], 1, 2 * 1000 + 5000 + 10 + 7000],
      [[2, 5], 0, 3 * 1000 + 5000 + 10 + 7000],
    ]);
  });

  // Regression: tensors outside the layers, embedding, norm and head (a vision projector) were on no
  // stage: neither staged nor counted, though every mlx-lm rank loads each file holding one.
  it("every rank counts and is staged a tensor outside the layers, embedding, norm and head", () => {
    const profile = syntheticProfile({
      layerBytes: new Array<number>(4).fill(1000),
      embeddingBytes: 500,
      normBytes: 10,
      lmHeadBytes: 700,
      otherBytes: 300,
      config: { model_type: "qwen2" },
    });
    const plan = planShards(profile, nodes, options);
    expect(plan.errors).toEqual([]);
    expect(plan.stages.map((s) => s.weightBytes)).toEqual([2 * 1000 + 500 + 10 + 700 + 300, 2 * 1000 + 500 + 10 + 700 + 300]);
    for (const stage of plan.stages) {
      expect(filesForStage(profile, { layers: stage.layers, first: stage.first, last: stage.last, keepsEnds: true })).toEqual(["extra.safetensors", "model.safetensors"]);
    }
    // An engine whose stages keep only their ends does not load it.
    expect(filesForStage(profile, { layers: [0, 2], first: true, last: false })).toEqual(["model.safetensors"]);
  });

  // Regression: a single model.safetensors was planned and staged, and every rank then failed to
  // load it (mlx-lm's pipelined load opens the index to find each rank's files).
  it("a model without model.safetensors.index.json is a plan error naming the file and what to do", () => {
    const profile = syntheticProfile({ layerBytes: new Array<number>(4).fill(1000), config: { model_type: "qwen2" }, indexed: false });
    const plan = planShards(profile, nodes, options);
    expect(plan.errors.map((e) => e.reason)).toEqual(["ModelIndexMissing"]);
    expect(plan.errors[0]!.message).toMatch(/^mlx-lm finds each rank's files through model\.safetensors\.index\.json, which this model does not have/);
    expect(planShards(profile, nodes, { ...options, engine: "reference" }).errors.map((e) => e.reason)).not.toContain("ModelIndexMissing");
  });

  it("a family mlx-lm cannot pipeline is an error that opting in does not lift, listing the families", () => {
    const profile = syntheticProfile({ layerBytes: new Array<number>(4).fill(1000) });
    const plan = planShards(profile, nodes, { ...options, allowUnvalidatedFamily: true });
    expect(plan.errors.map((e) => e.reason)).toEqual(["ModelFamilyUnsupported"]);
    expect(plan.errors[0]!.message).toMatch(/^mlx-lm cannot serve model family "llama" in pipeline mode; .*qwen2, qwen3_5/);
  });

  it("runs on any accelerator; the version command asks python for mlx-lm and mlx", () => {
    const facts = engineOf("mlx-lm");
    expect(facts.runsOn).toBeUndefined();
    expect(facts.versionCommand({})?.[0]).toBe("python3");
    expect(facts.versionCommand({ python: "/venv/bin/python" })?.[0]).toBe("/venv/bin/python");
  });
});

describe("an mlx-lm definition", () => {
  const settings = parseSettings('[nodes.a]\nhost = "10.0.0.1"\nmodel_dir = "/m"\n[nodes.b]\nhost = "10.0.0.2"\nmodel_dir = "/m"\n', "shardctl.toml");
  if (!settings.ok) throw new Error("settings");
  const parse = (extra: string) =>
    parseCluster(`nodes = ["a", "b"]\n[model]\nid = "/m"\nsource = "path"\n[engine]\nkind = "mlx-lm"\n${extra}`, "clusters/x.toml", settings.value);

  it("serves HTTP from the last node: [coordinator] node defaults to it", () => {
    const result = parse("");
    expect(result.ok && result.value.coordinator.node).toBe("b");
  });

  it("refuses another [coordinator] node and any [coordinator] host, at their keys", () => {
    const result = parse('[coordinator]\nnode = "a"\nhost = "0.0.0.0"\n');
    expect(result.ok).toBe(false);
    expect(result.ok ? [] : result.issues.map(formatIssue)).toEqual([
      'clusters/x.toml:8:8: coordinator.node: mlx-lm serves HTTP from the stage of the last layers, on node "b": set node = "b" or leave it out',
      "clusters/x.toml:9:8: coordinator.host: mlx-lm serves HTTP on the address of the last node (the one its ring peers dial): leave host out",
    ]);
  });

  it("refuses the flags mlx-lm rejects in distributed mode and the ones the driver sets", () => {
    const result = parse('extra_args = ["--draft-model=x", "--port", "1"]\n');
    expect(result.ok ? [] : result.issues.map(formatIssue).map((m) => m.replace(/^.*?: engine/, "engine"))).toEqual([
      'engine.extra_args[0]: "--draft-model=x" is refused: mlx-lm refuses draft models in distributed mode',
      'engine.extra_args[1]: "--port" is refused: the launcher sets --port itself',
    ]);
  });
});

describe("mlxcel, per the seed: all Apple silicon or all Linux CUDA", () => {
  const settingsWith = (a: string, b: string) => {
    const text = `[nodes.a]\nhost = "10.0.0.1"\nmodel_dir = "/m"\naccelerator = "${a}"\n[nodes.b]\nhost = "10.0.0.2"\nmodel_dir = "/m"\naccelerator = "${b}"\n`;
    const result = parseSettings(text, "shardctl.toml");
    if (!result.ok) throw new Error(result.issues.map(formatIssue).join("\n"));
    return result.value;
  };
  const parse = (a: string, b: string) =>
    parseCluster('nodes = ["a", "b"]\n[model]\nid = "/m"\nsource = "path"\n[engine]\nkind = "mlxcel"\n', "clusters/x.toml", settingsWith(a, b));

  it("accepts a homogeneous CUDA cluster and keeps refusing CPU-only nodes", () => {
    expect(parse("cuda", "cuda").ok).toBe(true);
    const cpu = parse("cuda", "cpu");
    expect(cpu.ok ? [] : cpu.issues.map(formatIssue)).toEqual([
      'clusters/x.toml:6:8: engine.kind: mlxcel runs on Apple silicon or Linux CUDA only; b (cpu) is declared otherwise: use kind = "reference" or "mlx-lm" or nodes with Apple silicon or Linux CUDA',
    ]);
  });

  it("refuses a cluster that mixes Apple silicon and CUDA", () => {
    const profile = syntheticProfile({ layerBytes: new Array<number>(4).fill(1000) });
    const plan = planShards(
      profile,
      [
        { name: "a", memoryBytes: 64 * GiB, accelerator: "apple-silicon" },
        { name: "b", memoryBytes: 64 * GiB, accelerator: "cuda" },
      ],
      { strategy: "equal", engine: "mlxcel", contextLength: 256, maxSequences: 1 },
    );
    expect(plan.errors.map((e) => e.reason)).toEqual(["MixedAccelerators"]);
  });
});

describe("mlx-lm versions before 0.32.0 split uneven layer counts wrongly", () => {
  it("names the layers that never run, and the version that fixed it", () => {
    expect(describeSplitDefect("mlx-lm 0.31.3 mlx 0.31.1", 61, 2)).toBe(
      "mlx-lm 0.31.3 splits 61 layers over 2 ranks wrongly (it never runs layer 30); fixed in mlx-lm 0.32.0: upgrade it, or use a number of nodes that divides 61",
    );
    expect(describeSplitDefect("0.30.7", 10, 3)).toMatch(/^mlx-lm 0.30.7 splits 10 layers over 3 ranks wrongly \(it never runs layer 6, 7\);/);
  });

  it("an even split, or 0.32.0 and later, is fine", () => {
    expect(describeSplitDefect("mlx-lm 0.31.3 mlx 0.31.1", 60, 2)).toBeUndefined();
    expect(describeSplitDefect("mlx-lm 0.32.0 mlx 0.32.0", 61, 2)).toBeUndefined();
    expect(describeSplitDefect("mlx-lm 0.32.2 mlx 0.32.4", 61, 2)).toBeUndefined();
    expect(describeSplitDefect("1.0.0", 61, 2)).toBeUndefined();
  });
});

describe("[engine] python", () => {
  const settings = parseSettings('[nodes.a]\nhost = "10.0.0.1"\nmodel_dir = "/m"\n[nodes.b]\nhost = "10.0.0.2"\nmodel_dir = "/m"\n', "shardctl.toml");
  if (!settings.ok) throw new Error("settings");
  const parse = (kind: string) =>
    parseCluster(`nodes = ["a", "b"]\n[model]\nid = "/m"\nsource = "path"\n[engine]\nkind = "${kind}"\npython = "/venv/bin/python"\n`, "clusters/x.toml", settings.value);

  it("is taken by mlx-lm and refused, at its key, by an engine that is a program of its own", () => {
    expect(parse("mlx-lm").ok).toBe(true);
    const reference = parse("reference");
    expect(reference.ok ? [] : reference.issues.map(formatIssue)).toEqual([
      'clusters/x.toml:7:10: engine.python: shard-engine runs its own program (shard-engine), not a Python module: remove python, or use kind = "mlx-lm"',
    ]);
  });
});

// Regression: nothing refused mlx-lm behind an external continuum-router, which sends clients' model
// names as they are; mlx-lm answers only "default_model" (another name makes every rank try to load it).
describe("mlx-lm and the router", () => {
  const nodes = '[nodes.a]\nhost = "10.0.0.1"\nmodel_dir = "/m"\n[nodes.b]\nhost = "10.0.0.2"\nmodel_dir = "/m"\n';
  const parseWith = (router: string, cluster = "") => {
    const settings = parseSettings(`${nodes}[router]\n${router}`, "/etc/shardctl/shardctl.toml");
    if (!settings.ok) throw new Error(JSON.stringify(settings.issues));
    return parseCluster(`nodes = ["a", "b"]\n[model]\nid = "/m"\nsource = "path"\n[engine]\nkind = "mlx-lm"\n${cluster}`, "clusters/x.toml", settings.value);
  };
  const issuesOf = (parsed: ReturnType<typeof parseWith>) => (parsed.ok ? [] : parsed.issues.map(formatIssue));

  it("is refused at engine.kind behind an external continuum-router, or its admin API", () => {
    for (const router of ['kind = "continuum"\nconfig = "router.yaml"\n', 'kind = "continuum"\nconfig = "router.yaml"\nadmin_url = "http://127.0.0.1:9000"\n']) {
      const issues = issuesOf(parseWith(router));
      expect(issues, router).toHaveLength(1);
      expect(issues[0]).toMatch(
        /^clusters\/x\.toml:6:8: engine\.kind: mlx-lm answers only the model name "default_model", and an external .* which makes every rank try to load a model of that name: run the embedded router/,
      );
    }
  });

  it("is taken with the embedded router, with no router, or when it does not register", () => {
    expect(issuesOf(parseWith('kind = "continuum"\nconfig = "router.yaml"\nembedded = true\n'))).toEqual([]);
    expect(issuesOf(parseWith('kind = "none"\n'))).toEqual([]);
    expect(issuesOf(parseWith('kind = "continuum"\nconfig = "router.yaml"\n', "[router]\nregister = false\n"))).toEqual([]);
  });
});

// Lines as MLX 0.32.4's ring backend prints them (MLX_RING_VERBOSE=1), from two real ranks on one machine.
describe("a rank's ring log, read after a launch's wait ended", () => {
  it("still connecting, refused: the neighbour is named with the errno in words and the attempts", () => {
    const tail = ["[ring] Rank 1 connecting to 0", "[ring] Attempt 0 waiting 1000 ms (error: 111 )", "[ring] Attempt 1 waiting 2000 ms (error: 111 )"];
    expect(ringNeighbourUnreachableIn(tail)).toEqual({ peer: "rank 0", address: "its address in the launch's hostfile", error: "connection refused, 2 attempts" });
  });
  it("still connecting with no answer (a blackholed link leaves the rank in connect())", () => {
    expect(ringNeighbourUnreachableIn(["loading", "[ring] Rank 1 connecting to 0"])?.error).toBe("still connecting, with no answer, when the launch stopped waiting");
  });
  it("connected: any line after the connection (its own accepting, the server's) clears it", () => {
    const rank1 = ["[ring] Rank 1 connecting to 0", "[ring] Attempt 0 waiting 1000 ms (error: 111 )", "[ring] Rank 1 accepting"];
    expect(ringNeighbourUnreachableIn(rank1)).toBeUndefined();
    expect(ringNeighbourUnreachableIn(["[ring] Rank 1 connecting to 0", "INFO:root:Prompt Cache: 10 sequences"])).toBeUndefined();
    expect(ringNeighbourUnreachableIn([])).toBeUndefined();
  });
  it("rank 0 connects last and then loads in silence: its log never tells, whatever it ends with", () => {
    expect(ringNeighbourUnreachableIn(["[ring] Rank 0 accepting", "[ring] Rank 0 connecting to 1"])).toBeUndefined();
    expect(ringNeighbourUnreachableIn(["[ring] Rank 0 accepting", "[ring] Rank 0 connecting to 1", "[ring] Attempt 0 waiting 1000 ms (error: 111 )"])).toBeUndefined();
  });
});
