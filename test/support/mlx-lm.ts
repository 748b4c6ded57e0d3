/**
 * Run mlx-lm, MLX's reference implementation, from tests and benchmarks: Python snippets and the
 * scripts in this folder, with the interpreter of the project's `.venv-mlx` (ensureMlxVenv installs
 * it on first use). Hub look-ups are switched off: the models are local test models. No vitest
 * imports (bench uses it too).
 */
import { spawn } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { ensureMlxVenv } from "./mlx-venv.js";

const supportDir = dirname(fileURLToPath(import.meta.url));

/** The greedy decoder script (reads a JSON request on stdin, writes JSON on stdout). */
export const mlxGreedyScript = join(supportDir, "mlx-greedy.py");

/** Environment for mlx-lm: offline (local models only; nothing may be fetched from the Hub). */
function mlxEnv(): NodeJS.ProcessEnv {
  return { ...process.env, HF_HUB_OFFLINE: "1", TRANSFORMERS_OFFLINE: "1", HF_HUB_DISABLE_TELEMETRY: "1", PYTHONUNBUFFERED: "1" };
}

/**
 * Run the venv's python with `args`, writing `stdin`; resolve with stdout. Rejects with the exit
 * code and stderr when python fails, or after `timeoutMs` (default 120 s) with the process killed.
 */
export async function runMlxPython(args: string[], stdin = "", timeoutMs = 120_000): Promise<string> {
  const { python } = await ensureMlxVenv();
  return new Promise((resolve, reject) => {
    const child = spawn(python, args, { env: mlxEnv(), stdio: ["pipe", "pipe", "pipe"] });
    let out = "";
    let err = "";
    child.stdout.on("data", (c: Buffer) => (out += c.toString("utf8")));
    child.stderr.on("data", (c: Buffer) => (err += c.toString("utf8")));
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
    child.once("error", (error) => {
      clearTimeout(timer);
      reject(error);
    });
    child.once("exit", (code, signal) => {
      clearTimeout(timer);
      if (code === 0) resolve(out);
      else reject(new Error(`python ${args.join(" ")} exited ${code ?? signal}:\n${err}`));
    });
    child.stdin.end(stdin);
  });
}

/** Run a Python snippet (`python -c`) in the venv; resolve with stdout. */
export function runMlxSnippet(code: string, timeoutMs?: number): Promise<string> {
  return runMlxPython(["-c", code], "", timeoutMs);
}

export interface MlxTopEntry {
  id: number;
  /** The token decoded alone, special tokens kept. */
  text: string;
  logprob: number;
}

export interface MlxGreedyToken extends MlxTopEntry {
  /** The `top` most likely tokens, most likely first. */
  top: MlxTopEntry[];
}

export interface MlxGreedyResult {
  /** The chat template rendered and tokenized by mlx-lm's tokenizer. */
  promptIds: number[];
  tokens: MlxGreedyToken[];
}

export interface MlxGreedyOptions {
  /** Candidates reported per token. Default 5. */
  top?: number;
  /**
   * Cast the model's float parameters to float32 before running (default false: the model's own
   * dtype). MLX computes in the parameters' dtype, so an f16 model rounds every activation to f16;
   * at float32 the same weights give log-probabilities exact to ~1e-6.
   */
  float32?: boolean;
}

/**
 * Greedy decoding of a chat by mlx-lm: the prompt ids it built and, per generated token, the
 * log-probabilities (float32 log-softmax of the logits) of the chosen and the `top` best tokens.
 */
export async function mlxGreedy(
  modelDir: string,
  messages: Array<{ role: string; content: string }>,
  maxTokens: number,
  options: MlxGreedyOptions = {},
): Promise<MlxGreedyResult> {
  const request = { model: modelDir, messages, max_tokens: maxTokens, top: options.top ?? 5, float32: options.float32 ?? false };
  const out = await runMlxPython([mlxGreedyScript], JSON.stringify(request));
  const parsed = JSON.parse(out) as { prompt_ids: number[]; tokens: MlxGreedyToken[] };
  return { promptIds: parsed.prompt_ids, tokens: parsed.tokens };
}
