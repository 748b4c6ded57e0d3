/**
 * Extra engine arguments as each engine's own parser reads them: mlx_lm.server's (Python's argparse)
 * takes an unambiguous prefix of a long flag for the flag, and any engine reads a negative number
 * given after its flag as the flag's value; a flag the program lacks is refused, since every
 * process would stop at start.
 */
import { expect, it } from "vitest";
import { engineOf } from "../../src/engines/index.js";
import { checkExtraArg } from "../../src/spec/check-engine.js";

it("mlx-lm: an unambiguous prefix of its flag is that flag; an ambiguous or unknown one is refused; a refused flag's prefix is refused", () => {
  const mlx = engineOf("mlx-lm");
  expect(checkExtraArg("--max-tok", mlx, true)).toBeUndefined();
  expect(checkExtraArg("--prefill-step", mlx, true)).toBeUndefined();
  // --top-p and --top-k: argparse calls it ambiguous and stops.
  expect(checkExtraArg("--top-", mlx, true)).toMatch(/is not a flag of mlx-lm/);
  expect(checkExtraArg("--no-such-flag", mlx, true)).toMatch(/is not a flag of mlx-lm/);
  expect(checkExtraArg("--kv-b", mlx, true)).toMatch(/is refused: it turns mlx-lm's batching off/);
});

it("a negative number is a value, not a flag; shard-engine takes no prefix of its flags", () => {
  expect(checkExtraArg("-1", engineOf("mlx-lm"), true)).toBeUndefined();
  expect(checkExtraArg("-0.5", engineOf("reference"), true)).toBeUndefined();
  expect(checkExtraArg("--compute-stall", engineOf("reference"), true)).toMatch(/is not a flag of shard-engine/);
});
