/**
 * Caps on the files inspection reads and bounds on the counts config.json declares. A count from
 * config.json sizes arrays (one entry per layer), products (KV bytes per token) and the shapes the
 * tensors are checked against, so a corrupt or hostile `num_hidden_layers = 1e12` must be refused
 * before anything is allocated from it. Each bound is generous enough for the largest real models
 * (the figures in the comments are from published configs) while keeping every product of them
 * well inside a safe integer.
 */

/** config.json, bytes (4 MiB). Real ones are 1–50 KB; classifier heads with label tables reach a few hundred KB. */
export const maxConfigBytes = 4 * 1024 * 1024;

/**
 * model.safetensors.index.json, bytes (64 MiB). About 100 bytes per tensor; a 1T-parameter MoE with
 * 384 experts per layer lists some 200,000 tensors, about 20 MB.
 */
export const maxIndexBytes = 64 * 1024 * 1024;

/**
 * All safetensors headers of one model together, bytes (64 MiB). About 100 bytes per tensor: a
 * 405B model's 191 headers total a few MB, a 1T-parameter MoE's some 20 MB. The format lets each
 * file's header reach 100 MB, and a repository of many such files would have the planner read and
 * parse gigabytes (every plan pass, blocking the daemon); past this sum nothing more is read.
 */
export const maxModelHeaderBytes = 64 * 1024 * 1024;

/**
 * Entries of all safetensors headers of one model together (tensors, and each file's
 * `__metadata__`): 1,000,000. Real models have far fewer: a 405B model some 1,100 tensors, quantized
 * ones (weights, scales and biases of every module) and large MoEs under 100,000. Counted from the
 * header bytes before they are parsed: parsing builds an object per tensor.
 */
export const maxModelTensors = 1_000_000;

/** Distinct safetensors files one index may name. A 405B model ships 191; each file costs a header read (two HTTP requests). */
export const maxSafetensorsFiles = 4096;

/** Upper bounds of config.json's counts (all must also be positive integers). */
export const configBounds = {
  /** num_hidden_layers. The deepest published LLMs have 126 (Llama 3.1 405B) to ~160. */
  layers: 1024,
  /** hidden_size. Largest published: 16,384 (Llama 3.1 405B) to ~25,600. */
  hiddenSize: 131_072,
  /** num_attention_heads and num_key_value_heads. Largest published: 128. */
  heads: 1024,
  /** head_dim. Usual: 64–256; MLA models reach 576 for their joint key/value head. */
  headDim: 8192,
  /** vocab_size. Largest published: 262,144 (Gemma 3); multilingual byte-level ones stay below 1M. */
  vocabSize: 4_194_304,
  /** intermediate_size. Largest published: 53,248 (Llama 3.1 405B) to ~100,000. */
  intermediateSize: 1_048_576,
  /** sliding_window, tokens: no larger than the longest context a definition may ask for (16M tokens). */
  slidingWindow: 16_777_216,
  /** Entries of config.json's `architectures`: one in practice. */
  architectures: 64,
} as const;
