/**
 * The model families shardctl plans for mlx-lm, checked against the mlx-lm the test set-up
 * installs (not against a copy of its lists): mlx-lm resolves a config.json `model_type` through
 * its own renames (`kimi_k2` is `deepseek_v3`) and some model classes are subclasses of others
 * (`qwen3_5_moe` of `qwen3_5`), so the families it pipelines are more than its pipelined modules.
 * A family whose model splits its layers its own way would run other layers on each node than the
 * plan sized and staged, so none may be listed.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { engineOf } from "../../src/engines/index.js";
import { runMlxSnippet } from "../support/mlx-lm.js";
import { ensureMlxVenv } from "../support/mlx-venv.js";

/**
 * Asks the installed mlx-lm, for the families given as its argument: how each `model_type`
 * resolves (MODEL_REMAPPING, then its module), whether that module can pipeline (a class with
 * `pipeline` is defined or imported where its `Model` or one of its bases is), which other
 * `model_type`s resolve to one of them (renamed to it, or a module whose `Model` subclasses its
 * `Model`), and whether one of its classes splits the layers its own way instead of with
 * PipelineMixin's even split.
 */
const inspect = String.raw`
import importlib, inspect, json, pkgutil, re, sys
import mlx_lm.models as models
from mlx_lm.models.pipeline import PipelineMixin
from mlx_lm.utils import MODEL_REMAPPING

families = json.loads(sys.argv[1])

def module_of(model_type):
    try:
        return importlib.import_module("mlx_lm.models." + MODEL_REMAPPING.get(model_type, model_type))
    except (ImportError, SystemExit):
        return None

def pipelines(module):
    # The module of its Model class or of any base class defines or imports a class with pipeline.
    homes = {module} | {sys.modules[c.__module__] for c in getattr(module, "Model", object).__mro__}
    return any(inspect.isclass(v) and callable(getattr(v, "pipeline", None)) for home in homes for v in vars(home).values())

listed = {f: module_of(f) for f in families}
unknown = sorted(f for f, m in listed.items() if m is None)
cannot = sorted(f for f, m in listed.items() if m is not None and not pipelines(m))
classes = tuple(m.Model for m in listed.values() if m is not None)
names = [m.name for m in pkgutil.iter_modules(models.__path__)] + list(MODEL_REMAPPING)
missing = set()
for name in names:
    if name in listed or "olmo" in name:  # olmo modules exit when ai2-olmo is missing
        continue
    module = module_of(name)
    model = getattr(module, "Model", None)
    if module is not None and model in classes or inspect.isclass(model) and issubclass(model, classes):
        missing.add(name)

def splits_its_own_way(module):
    # A pipeline method of the family's classes that is not PipelineMixin's even split, nor one that
    # hands the split it is given to it unchanged (kimi_k3 computes its own, bailing_hybrid splits
    # whole layer groups), nor one that only hands the call to an inner model.
    homes = {module} | {sys.modules[c.__module__] for c in getattr(module, "Model", object).__mro__}
    for home in homes:
        for cls in vars(home).values():
            method = inspect.isclass(cls) and cls.__dict__.get("pipeline")
            if not method or cls is PipelineMixin:
                continue
            source = inspect.getsource(method)
            delegates = re.search(r"self(\.\w+)+\.pipeline\(", source) is not None and "super()" not in source
            passes_on = "super().pipeline(" in source and re.search(r"^\s*split(\[[^]]*\])?\s*[+]?=", source, re.M) is None
            if not delegates and not passes_on:
                return True
    return False

own = sorted(f for f, m in listed.items() if m is not None and splits_its_own_way(m))
print(json.dumps({"unknown": unknown, "cannot": cannot, "missing": sorted(missing), "own": own}))
`;

describe("the families shardctl plans for mlx-lm, against the installed mlx-lm", () => {
  let found: { unknown: string[]; cannot: string[]; missing: string[]; own: string[] };

  beforeAll(async () => {
    await ensureMlxVenv();
    const families = JSON.stringify(engineOf("mlx-lm").modelFamilies.families);
    const code = `import sys; sys.argv = ["inspect", ${JSON.stringify(families)}]\n${inspect}`;
    found = JSON.parse((await runMlxSnippet(code)).trim().split("\n").at(-1)!) as typeof found;
  }, 600_000);

  it("every listed family is a model_type mlx-lm resolves to a module that can pipeline", () => {
    expect(found.unknown).toEqual([]);
    expect(found.cannot).toEqual([]);
  });

  it("every listed family splits its layers with mlx-lm's even split, the one shardctl plans and stages for", () => {
    expect(found.own).toEqual([]);
  });

  it("every model_type mlx-lm serves with a listed family's model class is listed too", () => {
    expect(found.missing).toEqual([]);
  });

  it("Llama and Mistral (renamed to llama by mlx-lm) stay refused: tensor-parallel only", () => {
    expect(engineOf("mlx-lm").modelFamilies.families).not.toContain("llama");
    expect(engineOf("mlx-lm").modelFamilies.families).not.toContain("mistral");
  });
});
