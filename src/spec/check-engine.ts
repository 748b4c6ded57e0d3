/**
 * The checks of a definition that depend on its engine kind: what the engine's facts refuse,
 * reported at the offending key before anything is planned or launched. They read the raw TOML
 * data, beside the schema, so they report alongside its issues.
 */
import { isIPv4 } from "node:net";
import { canRunOn, defaultEngineKind, engineOf, isEngineKind, quoteKinds, selectKinds, selectKindsRunningOn, type EngineFacts } from "../engines/index.js";
import { maxExtraArgs } from "./cluster-schema.js";
import { patterns, quote } from "./patterns.js";
import { getRaw } from "./raw.js";
import type { Settings } from "./types.js";

/** Records one issue at the value of `path`. */
export type AddIssue = (path: (string | number)[], message: string) => void;

export function checkEngine(data: unknown, settings: Settings, add: AddIssue): void {
  const kind = getRaw(data, ["engine", "kind"]) ?? defaultEngineKind;
  const engine = isEngineKind(kind) ? engineOf(kind) : undefined;
  // An unknown kind is the schema's to report; its arguments are still checked (by the default
  // kind's rules) so that every other problem shows in the same run.
  checkExtraArgs(data, engine ?? engineOf(defaultEngineKind), add);
  if (engine === undefined) return;
  checkStrategy(data, engine, add);
  checkDeclaredAccelerators(data, settings, engine, add);
  checkHttpServer(data, engine, add);
  checkHttpHost(data, engine, add);
  checkInterpreter(data, engine, add);
  checkServedName(data, settings, engine, add);
}

/**
 * An engine that answers one fixed model name (mlx-lm: "default_model"; any other name makes every
 * rank try to load a model of that name) needs the embedded router, which rewrites each request's
 * `model`; an external continuum-router sends the clients' name as it is.
 */
function checkServedName(data: unknown, settings: Settings, engine: EngineFacts, add: AddIssue): void {
  if (engine.servedModelName === undefined || getRaw(data, ["router", "register"]) === false || settings.router.kind !== "continuum") return;
  // The embedded router (settings refuse an admin_url beside it).
  if (settings.router.embedded) return;
  const through =
    settings.router.adminUrl !== undefined ? "an external router's admin API ([router] admin_url)" : "an external continuum-router ([router] embedded = false)";
  add(
    ["engine", "kind"],
    `${engine.name} answers only the model name ${quote(engine.servedModelName)}, and ${through} would send it the clients' name, which makes every rank try to load a model of that name: ` +
      `run the embedded router (shardctl.toml [router] embedded = true), which rewrites the name, or set [router] register = false here`,
  );
}

/** `[coordinator] host` for an engine that takes an IPv4 address only there. */
function checkHttpHost(data: unknown, engine: EngineFacts, add: AddIssue): void {
  const host = getRaw(data, ["coordinator", "host"]);
  // A value the schema refuses is reported there, once.
  if (engine.httpHostIPv4 === undefined || typeof host !== "string" || !patterns.host.test(host) || isIPv4(host)) return;
  add(["coordinator", "host"], `${quote(host)} is not an IPv4 address: ${engine.httpHostIPv4}; give one, such as 127.0.0.1, 0.0.0.0 or the node's own address`);
}

/**
 * `[engine] python` names the interpreter of an engine run as a Python module; another engine would
 * ignore it. Such an engine ignores `binary` in turn: it runs `<python> -m <module>`.
 */
function checkInterpreter(data: unknown, engine: EngineFacts, add: AddIssue): void {
  if (engine.interpreter === "python" && getRaw(data, ["engine", "binary"]) !== undefined) {
    add(
      ["engine", "binary"],
      `${engine.name} runs as \`<python> -m ${engine.programName}\` on each node: remove binary, and name the interpreter with python (default python3)`,
    );
  }
  if (getRaw(data, ["engine", "python"]) === undefined || engine.interpreter === "python") return;
  const able = selectKinds((e) => e.interpreter === "python");
  add(["engine", "python"], `${engine.name} runs its own program (${engine.programName}), not a Python module: remove python, or use kind = ${quoteKinds(able)}`);
}

/**
 * Why an extra engine argument is refused, or undefined when it is acceptable: a flag the engine
 * refuses or the launcher sets, or (for the engine's own program, whose flags are known) a flag it
 * does not read. The engine's
 * argument parser has the last word, so every spelling it reads as a protected flag counts: a
 * long flag with its value after "=", a short flag with its value glued on ("-m/other/model"),
 * and a long flag's prefix ("--mod", which Python's argparse expands to --model).
 */
export function checkExtraArg(arg: string, engine: EngineFacts, ownProgram: boolean): string | undefined {
  const { refused, setByDriver, flags } = engine.extraArgs;
  for (const flag of flagsNamedBy(arg)) {
    const full = Object.keys(refused).find((f) => namedBy(f, flag)) ?? setByDriver.find((f) => namedBy(f, flag));
    if (full !== undefined) {
      if (Object.hasOwn(refused, full)) return `${quote(arg)} is refused: ${refused[full]}`;
      return `${quote(arg)} is refused: the launcher sets ${full} itself`;
    }
    // Python's argparse takes a long flag's unambiguous prefix for the flag.
    const expanded = engine.interpreter === "python" && flag.startsWith("--") ? (flags ?? []).filter((f) => f.startsWith(flag)) : [];
    if (ownProgram && flags !== undefined && !flags.includes(flag) && expanded.length !== 1) {
      const open = flags.filter((f) => f.startsWith("--") && !Object.hasOwn(refused, f) && !setByDriver.includes(f));
      return `${quote(arg)} is not a flag of ${engine.name}: every process would stop at start (the flags a definition may pass: ${open.join(", ")})`;
    }
  }
  return undefined;
}

/**
 * The flag an argument can stand for: none for a value, "--name" for a long flag, "-x" for a short
 * one, whatever follows its letter (a glued value, or more letters, which only a boolean first
 * letter would group: -h and -V end the engine at once).
 */
function flagsNamedBy(arg: string): string[] {
  if (arg.startsWith("--")) return arg.length > 2 ? [arg.split("=", 1)[0]!] : [];
  // A negative number is a value ("--top-k", "-1"), as the engines' parsers read it.
  if (/^-\d/.test(arg)) return [];
  return arg.startsWith("-") && arg.length >= 2 ? [arg.slice(0, 2)] : [];
}

/** Whether `given` names the protected flag `flag`: the same short flag, or the long flag or a prefix of it. */
function namedBy(flag: string, given: string): boolean {
  if (!given.startsWith("--")) return flag === given;
  return flag.startsWith("--") && flag.startsWith(given);
}

function checkExtraArgs(data: unknown, engine: EngineFacts, add: AddIssue): void {
  const args = getRaw(data, ["engine", "extra_args"]);
  // Over the schema's maximum, zod reports the length alone and none of the elements.
  if (!Array.isArray(args) || args.length > maxExtraArgs) return;
  // Another program named by `binary` may read other flags than the engine's own.
  const ownProgram = getRaw(data, ["engine", "binary"]) === undefined;
  args.forEach((arg: unknown, index) => {
    if (typeof arg !== "string") return;
    const problem = checkExtraArg(arg, engine, ownProgram) ?? (ownProgram ? checkIntegerValue(args, index, engine) : undefined);
    if (problem !== undefined) add(["engine", "extra_args", index], problem);
  });
}

/**
 * The value of an integer flag of the engine's own program at `args[index]` ("--flag=value", or
 * "--flag" and the next argument): a number its parser refuses stops every process at start.
 */
function checkIntegerValue(args: readonly unknown[], index: number, engine: EngineFacts): string | undefined {
  const arg = args[index] as string;
  if (!arg.startsWith("--")) return undefined;
  const [flag, glued] = arg.includes("=") ? [arg.slice(0, arg.indexOf("=")), arg.slice(arg.indexOf("=") + 1)] : [arg, undefined];
  const range = engine.extraArgs.integers?.[flag];
  if (range === undefined) return undefined;
  const value = glued ?? args[index + 1];
  const [min, max] = range;
  if (typeof value !== "string") return `${quote(arg)} needs a value after it (an integer from ${min} to ${max}): every process would stop at start`;
  const n = Number(value);
  if (value.trim() !== "" && Number.isInteger(n) && n >= min && n <= max) return undefined;
  return `${quote(arg)}${glued === undefined ? ` ${quote(value)}` : ""}: ${engine.name} takes an integer from ${min} to ${max} for ${flag}: every process would stop at start`;
}

/** The "memory" strategy writes explicit layer ranges: an engine that cannot take them cannot run it. */
function checkStrategy(data: unknown, engine: EngineFacts, add: AddIssue): void {
  if (engine.acceptsExplicitLayers || getRaw(data, ["plan", "strategy"]) !== "memory") return;
  const able = selectKinds((e) => e.acceptsExplicitLayers);
  add(
    ["plan", "strategy"],
    `the "memory" strategy needs the ${able.join(" or ")} engine: ${engine.name} cannot be told a split (use "equal", or [engine] kind = ${quoteKinds(able)})`,
  );
}

/** Nodes the registry declares with an accelerator the engine does not run on. */
function checkDeclaredAccelerators(data: unknown, settings: Settings, engine: EngineFacts, add: AddIssue): void {
  const runsOn = engine.runsOn;
  const names = getRaw(data, ["nodes"]);
  if (runsOn === undefined || !Array.isArray(names)) return;
  const other = [...new Set(names.filter((n): n is string => typeof n === "string"))].flatMap((node) => {
    const accelerator = settings.nodes[node]?.accelerator;
    return accelerator === undefined || canRunOn(engine, accelerator) ? [] : [{ node, accelerator }];
  });
  if (other.length === 0) return;
  const instead = selectKindsRunningOn(other.map((o) => o.accelerator));
  const nodes = `nodes with ${runsOn.name}`;
  const hint = instead.length === 0 ? `use ${nodes}` : `use kind = ${quoteKinds(instead)} or ${nodes}`;
  const listed = other.map((o) => `${o.node} (${o.accelerator})`).join(", ");
  add(["engine", "kind"], `${engine.name} runs on ${runsOn.name} only; ${listed} ${other.length === 1 ? "is" : "are"} declared otherwise: ${hint}`);
}

/**
 * An engine whose last stage serves HTTP (mlx-lm's rank 0) listens on that stage's node, at the
 * address its peers dial: `[coordinator] node` may only name that node, and `host` is not asked.
 */
function checkHttpServer(data: unknown, engine: EngineFacts, add: AddIssue): void {
  if (engine.readiness.httpServer !== "last-stage") return;
  const nodes = getRaw(data, ["nodes"]);
  const last = Array.isArray(nodes) ? nodes.at(-1) : undefined;
  const node = getRaw(data, ["coordinator", "node"]);
  if (node !== undefined && typeof last === "string" && node !== last) {
    add(["coordinator", "node"], `${engine.name} serves HTTP from the stage of the last layers, on node "${last}": set node = "${last}" or leave it out`);
  }
  if (getRaw(data, ["coordinator", "host"]) !== undefined) {
    add(["coordinator", "host"], `${engine.name} serves HTTP on the address of the last node (the one its ring peers dial): leave host out`);
  }
}
