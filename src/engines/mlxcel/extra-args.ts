import type { ExtraArgRules } from "../types.js";

/**
 * What `[engine] extra_args` may not hold for mlxcel: the flags it rejects in distributed mode
 * (it would exit at start, on every node) and the flags the driver already sets per process.
 */
export const mlxcelExtraArgs: ExtraArgRules = {
  refused: {
    "--pp-layers": "mlxcel computes the pipeline split itself and rejects --pp-layers in distributed mode",
    "--tp-size": "mlxcel rejects tensor parallelism in distributed mode",
    "--no-batch": "mlxcel rejects --no-batch in distributed mode",
    "--adapter-path": "mlxcel rejects LoRA adapters in distributed mode",
    "--draft-model": "mlxcel rejects speculative decoding in distributed mode",
    "--num-draft-tokens": "mlxcel rejects speculative decoding in distributed mode",
  },
  setByDriver: ["-m", "--model", "--distributed-config", "--node-id", "--host", "--port"],
};
