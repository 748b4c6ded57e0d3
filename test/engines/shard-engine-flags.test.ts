/**
 * shard-engine's parser is strict: a flag it does not read stops every process at start. Its facts
 * list the flags, so `validate` says so before a launch spends the restart budget; the list must
 * be the parser's own, and another program named by `[engine] binary` is not held to it.
 */
import { describe, expect, it } from "vitest";
import { engineFlags, parseEngineArgs } from "../../src/engine/args.js";
import { referenceFacts } from "../../src/engines/reference/facts.js";
import { formatIssue, parseCluster, parseSettings } from "../../src/spec/index.js";

const settings = parseSettings('[nodes.a]\nhost = "10.0.0.1"\nmodel_dir = "/m"\n[nodes.b]\nhost = "10.0.0.2"\nmodel_dir = "/m"\n', "shardctl.toml");
if (!settings.ok) throw new Error(settings.issues.map(formatIssue).join("\n"));
const parse = (engine: string) =>
  parseCluster(`nodes = ["a", "b"]\n[model]\nid = "/m"\nsource = "path"\n[engine]\nkind = "reference"\n${engine}\n`, "clusters/x.toml", settings.value);
const problems = (engine: string): string[] => {
  const result = parse(engine);
  return result.ok ? [] : result.issues.map((i) => `${i.path}: ${i.message}`);
};

describe("shard-engine's flags", () => {
  it("are the flags its parser reads, long and short", () => {
    const parsed = Object.entries(engineFlags).flatMap(([name, option]) => ["--" + name, ...("short" in option ? ["-" + option.short] : [])]);
    expect([...(referenceFacts.extraArgs.flags ?? [])].sort()).toEqual(parsed.sort());
    // And the parser refuses what is not among them.
    expect(() => parseEngineArgs(["-m", "/m", "--no-such-flag"])).toThrow(/Unknown option '--no-such-flag'/);
  });

  it("a definition may pass the ones the launcher leaves to it, as flags and with values", () => {
    expect(
      problems(
        'extra_args = ["--no-warmup", "--connect-timeout-ms", "5000", "--broken-exit-delay-ms=200", "--compute-stall-ms", "900", "--large-heartbeat-ms=0", "--client-stall-ms=100"]',
      ),
    ).toEqual([]);
  });

  it("an unknown flag, a misspelt one or an unknown short one is refused at its place, naming the flags a definition may pass", () => {
    expect(problems('extra_args = ["--conect-timeout-ms", "5", "--threads-per-stage=2", "-x"]')).toEqual([
      'engine.extra_args[0]: "--conect-timeout-ms" is not a flag of shard-engine: every process would stop at start (the flags a definition may pass: --max-queued, --no-warmup, --connect-timeout-ms, --broken-exit-delay-ms, --compute-stall-ms, --large-heartbeat-ms, --client-stall-ms, --drain-ms)',
      expect.stringMatching(/^engine\.extra_args\[2\]: "--threads-per-stage=2" is not a flag of shard-engine/),
      expect.stringMatching(/^engine\.extra_args\[3\]: "-x" is not a flag of shard-engine/),
    ]);
  });

  it("an integer flag's bounds are its parser's, and a value outside them, or none, is refused at its place", () => {
    const integers = Object.entries(referenceFacts.extraArgs.integers ?? {});
    expect(integers.length).toBeGreaterThan(0);
    for (const [flag, [min, max]] of integers) {
      for (const ok of [min, max]) expect(() => parseEngineArgs(["-m", "/m", `${flag}=${ok}`]), `${flag}=${ok}`).not.toThrow();
      for (const bad of [min - 1, max + 1]) expect(() => parseEngineArgs(["-m", "/m", `${flag}=${bad}`]), `${flag}=${bad}`).toThrow(/to be an integer between/);
    }
    expect(problems('extra_args = ["--compute-stall-ms=-1", "--connect-timeout-ms", "NaN", "--client-stall-ms", "100", "--broken-exit-delay-ms"]')).toEqual([
      'engine.extra_args[0]: "--compute-stall-ms=-1": shard-engine takes an integer from 100 to 86400000 for --compute-stall-ms: every process would stop at start',
      'engine.extra_args[1]: "--connect-timeout-ms" "NaN": shard-engine takes an integer from 1 to 86400000 for --connect-timeout-ms: every process would stop at start',
      'engine.extra_args[5]: "--broken-exit-delay-ms" needs a value after it (an integer from 0 to 600000): every process would stop at start',
    ]);
  });

  it("--help and --version (or -h, -V) are refused: the process would print and exit", () => {
    expect(problems('extra_args = ["--help", "-V"]')).toEqual([
      'engine.extra_args[0]: "--help" is refused: shard-engine prints its usage and exits: no process would serve',
      'engine.extra_args[1]: "-V" is refused: shard-engine prints its version and exits: no process would serve',
    ]);
  });

  it("with [engine] binary naming another program, its flags are its own: only the launcher's and the refused ones are checked", () => {
    expect(problems('binary = "/opt/other/shard-engine"\nextra_args = ["--newer-flag", "1"]')).toEqual([]);
    expect(problems('binary = "/opt/other/shard-engine"\nextra_args = ["--threads=2"]')).toEqual([
      'engine.extra_args[0]: "--threads=2" is refused: the launcher sets --threads itself',
    ]);
  });
});
