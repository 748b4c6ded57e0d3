import type { EngineFacts } from "../types.js";
import { mlxcelExtraArgs } from "./extra-args.js";
import { mlxcelSplit } from "./split-layers.js";

/** mlxcel (`mlxcel-server`), the production engine: MLX on Apple silicon or on Linux with CUDA. */
export const mlxcelFacts = {
  kind: "mlxcel",
  name: "mlxcel",
  programName: "mlxcel-server",
  // Installed on each node, found on its PATH unless `[engine] binary` names it.
  defaultBinary: "mlxcel-server",
  // The binary that will run is the one asked: a node where it fails cannot take a stage.
  versionCommand: (options) => [options.binary ?? "mlxcel-server", "--version"],
  // MLX on Apple silicon's GPU or on CUDA GPUs, never a CPU-only node; a cluster is all one or all
  // the other (the planner refuses mixed accelerator families), with one mlxcel version.
  runsOn: { accelerators: ["apple-silicon", "cuda"], name: "Apple silicon or Linux CUDA" },
  // mlxcel computes its own split and cannot be told another one.
  acceptsExplicitLayers: false,
  ownSplit: {
    name: "mlxcel's split",
    countLayers: mlxcelSplit,
    equalLayersOnly: "mlxcel splits a model whose layers differ in size (mixture-of-experts, mixed layers) by their real bytes, by a rule not known here",
  },
  nonLayerTensors: "ends",
  // Mistral is the Llama architecture (RMSNorm, RoPE, grouped-query attention, SwiGLU MLP, same
  // tensor names) plus a sliding window the KV estimate accounts for. Qwen2 is left out: its
  // attention projections carry biases the Llama path does not load, so it must be opted into
  // with allow_unvalidated_family.
  modelFamilies: { families: ["llama", "mistral"], name: "Llama family" },
  // mlxcel has no transport authentication: trusted network segments only.
  authenticatesTransport: false,
  // In distributed mode its coordinator parses "--host:--port" as a Rust socket address, to check
  // it differs from its control address: a host name or a bare IPv6 address fails that parse.
  httpHostIPv4: "mlxcel's coordinator reads --host:--port as a socket address and exits at start on a host name or an IPv6 address",
  extraArgs: mlxcelExtraArgs,
  stageCount: {
    validatedUpTo: 2,
    advice: "mlxcel is validated best on two-stage topologies; each extra stage adds a network hop per token",
  },
  // The factor mlxcel itself applies to its memory budget.
  memoryHeadroom: 1.2,
  // mlxcel-server takes no thread count.
  sharedMachineCores: undefined,
  readiness: {
    healthPath: "/health",
    readyStatus: 200,
    loadingStatus: 503,
    completionsPath: "/v1/completions",
    stageUp: "transport-listening",
    httpServer: "coordinator",
    processExit: "ends-pipeline",
  },
} as const satisfies EngineFacts;
