"""Greedy decoding with mlx-lm, the reference implementation, for cross-checks against shard-engine.

Reads one JSON request on stdin: {"model": dir, "messages": [...], "max_tokens": N, "top": K,
"float32": bool}. With "float32" the model's float parameters (quantization scales and biases
included; packed weights stay as they are) are cast to float32 first, so the same weights run
without float16 rounding of every activation: MLX computes in the parameters' dtype.
Renders the model's chat template with a generation prompt, then decodes greedily (no KV-cache
tricks beyond mlx-lm's own cache) and writes one JSON object on stdout:
{"prompt_ids": [...], "tokens": [{"id", "text", "logprob", "top": [{"id", "text", "logprob"}]}]}.
Log-probabilities are log-softmax of the logits taken in float32 (the logits themselves are in the
model's dtype, as mlx-lm computes them); "text" is the token decoded alone, special tokens kept.
"""

import json
import sys

import mlx.core as mx
from mlx_lm import load
from mlx_lm.models.cache import make_prompt_cache


def main() -> None:
    request = json.load(sys.stdin)
    model, tokenizer = load(request["model"])
    if request.get("float32", False):
        model.set_dtype(mx.float32)
    prompt_ids = tokenizer.apply_chat_template(request["messages"], add_generation_prompt=True)
    top = int(request.get("top", 5))
    cache = make_prompt_cache(model)
    inputs = mx.array(prompt_ids)[None]
    tokens = []
    for _ in range(int(request["max_tokens"])):
        logits = model(inputs, cache=cache)[0, -1].astype(mx.float32)
        logprobs = logits - mx.logsumexp(logits, keepdims=True)
        order = mx.argsort(-logprobs)[:top].tolist()
        values = logprobs.tolist()
        chosen = order[0]
        text = lambda i: tokenizer.decode([i], skip_special_tokens=False)
        tokens.append(
            {
                "id": chosen,
                "text": text(chosen),
                "logprob": values[chosen],
                "top": [{"id": i, "text": text(i), "logprob": values[i]} for i in order],
            }
        )
        if chosen in tokenizer.eos_token_ids:
            break
        inputs = mx.array([[chosen]])
    json.dump({"prompt_ids": prompt_ids, "tokens": tokens}, sys.stdout)


if __name__ == "__main__":
    main()
