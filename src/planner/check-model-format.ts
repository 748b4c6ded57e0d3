/**
 * A model the planner reads may still be one the engine cannot load: a dtype its loader does not
 * widen, a quantization its kernels do not unpack, a config.json field it requires. Planned, such a
 * model is staged and launched, every launch fails at load and the cluster stalls once its restart
 * budget is spent. So what the engine's facts say it cannot read (EngineFacts.modelFormat) is a
 * plan error up front, naming the file, the field or tensor, and what to do.
 */
import type { EngineFacts, ModelFormat } from "../engines/index.js";
import { quoteText } from "../errors/index.js";
import type { ModelProfile } from "./model-profile.js";
import type { PlanMessage } from "./plan-types.js";

/** The ModelUnsupportedByEngine errors of `profile` for `engine`; none when its facts state no limits. */
export function checkModelFormat(profile: ModelProfile, engine: EngineFacts): PlanMessage[] {
  const format = engine.modelFormat;
  if (format === undefined) return [];
  const config = `${profile.source}/config.json`;
  const messages = [
    ...checkLayout(profile, format, config, engine.name),
    ...checkConfigFields(profile, format, config, engine.name),
    ...checkQuantization(profile, format, config, engine.name),
    ...checkDtypes(profile, format, engine.name),
  ];
  return messages.map((message) => ({ reason: "ModelUnsupportedByEngine", message }));
}

function checkLayout(profile: ModelProfile, format: ModelFormat, config: string, engine: string): string[] {
  if (!format.topLevelOnly || (!profile.config.textConfig && profile.tensorPrefix === "")) return [];
  const where = profile.config.textConfig ? "keeps the language model's fields under text_config" : `names its tensors ${profile.tensorPrefix}model.*`;
  return [
    `${config}: a multimodal checkpoint that ${where}; ${engine} reads config.json's top level and tensors named model.* only: ` +
      "serve the model's text-only version, or use another engine",
  ];
}

function checkConfigFields(profile: ModelProfile, format: ModelFormat, config: string, engine: string): string[] {
  const { statedFields, ropeScalingType } = profile.config;
  const messages = format.requiredConfigFields
    .filter((field) => !statedFields.includes(field))
    .map((field) => `${config}: ${field} is missing, and ${engine} requires it: add it as the model's published config.json gives it`);
  if (ropeScalingType !== undefined && !format.ropeScalingTypes.includes(ropeScalingType)) {
    const named = ropeScalingType === "" ? "names no type" : `is of type ${quoteText(ropeScalingType)}`;
    messages.push(`${config}: rope_scaling ${named}, and ${engine} implements ${format.ropeScalingTypes.join(", ")} only: use another engine for this model`);
  }
  return messages;
}

function checkQuantization(profile: ModelProfile, format: ModelFormat, config: string, engine: string): string[] {
  const quantization = profile.config.quantization;
  if (quantization === undefined) return [];
  const { bits: widths, modes, perModuleGroupSize } = format.quantization;
  const messages: string[] = [];
  const loads = `${engine} loads ${widths.map((w) => `${w.bits}-bit`).join(" and ")} ${modes.join(", ")} quantization`;
  if (!modes.includes(quantization.mode)) {
    messages.push(`${config}: quantization.mode is ${quoteText(quantization.mode)}, and ${loads} only: quantize the model in that mode, or use another engine`);
  }
  // The default, and each module's own setting (false: left in floating point).
  const settings = [
    { key: "quantization", ...quantization },
    ...Object.entries(quantization.overrides).flatMap(([module, own]) => (own === false ? [] : [{ key: `quantization[${quoteText(module)}]`, ...own }])),
  ];
  for (const { key, bits, groupSize } of settings) {
    const width = widths.find((w) => w.bits === bits);
    if (width === undefined) {
      messages.push(`${config}: ${key}.bits = ${bits}, and ${loads} only: quantize the model to ${widths.map((w) => w.bits).join(" or ")} bits, or use another engine`);
    } else if (groupSize % width.groupSizeMultiple !== 0) {
      messages.push(
        `${config}: ${key}.group_size = ${groupSize} at ${bits} bits, and ${engine} needs a multiple of ${width.groupSizeMultiple} there: ` +
          "quantize the model with a larger group size (64 is MLX's default), or use another engine",
      );
    } else if (!perModuleGroupSize && groupSize !== quantization.groupSize) {
      messages.push(
        `${config}: ${key}.group_size = ${groupSize}, and ${engine} reads every module with the default group size (${quantization.groupSize}): ` +
          "quantize the model with one group size, or use another engine",
      );
    }
  }
  return messages;
}

function checkDtypes(profile: ModelProfile, format: ModelFormat, engine: string): string[] {
  const allowed = format.floatDtypes;
  return profile.dtypes
    .filter(({ dtype }) => !allowed.includes(dtype))
    .map(
      ({ dtype, file, tensor }) =>
        `${profile.source}/${file}: tensor ${quoteText(tensor)} is ${dtype}, and ${engine} loads ${allowed.join(", ")} tensors only (and MLX-quantized weights): ` +
        "convert the model to one of them (mlx_lm.convert --dtype bfloat16, with -q to quantize), or use another engine",
    );
}
