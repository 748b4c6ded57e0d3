/**
 * Reasons of inspecting a model and planning its shards (src/planner). Inspection failures are
 * thrown; plan errors make the plan infeasible, which stalls until the definition or the nodes
 * change; plan warnings are only reported.
 */
export type PlannerReason =
  /** The model source did not answer, answered 5xx, or a read came back short (transient). */
  | "ModelSourceUnreachable"
  /** The Hub has no such repository or revision (terminal). */
  | "ModelNotFound"
  /** The Hub refused the token, or wants one (terminal). */
  | "ModelSourceUnauthorized"
  /** A JSON file of the model does not parse (terminal). */
  | "ModelFileInvalid"
  /** A safetensors header is malformed (not JSON, offsets outside the data, overlapping tensors), or a model's headers are past their caps (bytes, entries) (terminal). */
  | "SafetensorsHeaderInvalid"
  /** The model is a path on the nodes, which the control machine cannot read to plan from (terminal). */
  | "ModelNotInspectable"
  /** config.json lacks or misstates a field the plan needs (terminal). */
  | "ModelConfigInvalid"
  /** There is no config.json: not an MLX-format model (terminal). */
  | "ModelConfigMissing"
  /** Not an MLX-format model: foreign quantization, no safetensors, foreign tensor names (terminal). */
  | "ModelNotMlx"
  /** model.safetensors.index.json is malformed or disagrees with the files it maps (terminal). */
  | "ModelIndexInvalid"
  /** The engine needs model.safetensors.index.json and the model has none (terminal). */
  | "ModelIndexMissing"
  /** The model has no tokenizer (neither tokenizer.json nor tokenizer.model): no engine can serve it (terminal). */
  | "ModelTokenizerMissing"
  /** Warning: the engine splits this model by a rule not known here; the plan shows the equal-layer one. */
  | "SplitUnknown"
  /** A per-layer tensor name carries no layer index (terminal). */
  | "ModelLayerIndexMissing"
  /** config.json's layer count differs from the layers the weights hold (terminal). */
  | "ModelLayerCountMismatch"
  /** A tensor's shape (or quantized packing) disagrees with config.json, e.g. k_proj rows ≠ kv heads × head_dim (terminal). */
  | "ModelTensorShapeMismatch"
  /** A tensor the declared family does not have, e.g. mixture-of-experts tensors in a model declared llama (terminal). */
  | "ModelTensorUnexpected"
  /** A tensor the declared family needs is absent, e.g. a layer without o_proj (terminal). */
  | "ModelTensorMissing"
  /** Plan error: context length, max sequences or headroom out of range. */
  | "InvalidPlanOptions"
  /** Plan error: pipeline parallelism needs at least two nodes. */
  | "TooFewNodes"
  /** Plan error: a node is listed more than once. */
  | "DuplicateNode"
  /** Plan error: more stages than the model has layers. */
  | "TooManyStages"
  /** Plan error: the nodes mix accelerator families. */
  | "MixedAccelerators"
  /** Plan error: the nodes report different engine versions. */
  | "MixedEngineVersions"
  /** Plan error, or a warning when the definition opts in: the model family is not validated. */
  | "UnvalidatedModelFamily"
  /** Plan error: the engine version's own split would run some layers twice or never (mlx-lm before 0.32.0). */
  | "EngineSplitDefect"
  /** Plan error: the engine cannot serve the model family at all (mlx-lm pipelines only some families). */
  | "ModelFamilyUnsupported"
  /** Plan error: the engine's loader cannot read the model as stored (a dtype, a quantization, a config.json field or layout it lacks). */
  | "ModelUnsupportedByEngine"
  /** Plan error: strategy "memory" needs the reference engine (mlxcel splits equally). */
  | "StrategyUnsupportedByEngine"
  /** Plan error: a node has neither a declared nor a probed memory budget. */
  | "NodeMemoryUnknown"
  /** Plan warning: a node was probed but its probe gave no memory figure (timed out, failed): its budget is its declared memory. */
  | "NodeMemoryNotProbed"
  /** Plan error: mlxcel's equal split leaves a stage without layers. */
  | "EmptyStage"
  /** Plan error: a stage's weights and KV cache exceed its node's budget. */
  | "StageDoesNotFit"
  /** Plan error (and a terminal error of the node probe): mlxcel on a node that is not Apple silicon. */
  | "EngineUnsupportedOnNode"
  /** Plan error: a node reports another engine version than `[engine] version`. */
  | "EngineVersionMismatch"
  /** Plan warning: more than two stages, each adding a network hop per token. */
  | "MoreThanTwoStages"
  /** Plan warning: one node alone fits the whole model. */
  | "PipelineNotNeeded"
  /** Plan note (a warning): several stages run on one machine and share its cores. */
  | "StagesShareMachine";
