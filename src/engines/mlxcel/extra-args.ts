import type { ExtraArgRules } from "../types.js";

/**
 * What `[engine] extra_args` may not hold for mlxcel: the flags it rejects in distributed mode
 * (it would exit at start, on every node), the flags the driver already sets per process, and
 * `--api-prefix`, which moves every HTTP route (`/health` too) under a prefix that launch's health
 * checks, its first completion and the router's backend entry do not use: the coordinator would
 * load and then be reported down, launch after launch.
 */
export const mlxcelExtraArgs: ExtraArgRules = {
  refused: {
    "--pp-layers": "mlxcel computes the pipeline split itself and rejects --pp-layers in distributed mode",
    "--tp-size": "mlxcel rejects tensor parallelism in distributed mode",
    "--no-batch": "mlxcel rejects --no-batch in distributed mode",
    "--adapter-path": "mlxcel rejects LoRA adapters in distributed mode",
    "--draft-model": "mlxcel rejects speculative decoding in distributed mode",
    "--num-draft-tokens": "mlxcel rejects speculative decoding in distributed mode",
    "--api-prefix":
      "--api-prefix moves every route (/health, /v1/completions) away from where launch, health checks and the router call them; put a prefix in front of the router instead",
  },
  setByDriver: ["-m", "--model", "--distributed-config", "--node-id", "--host", "--port"],
};
