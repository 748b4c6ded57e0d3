/**
 * The order test files start in: vitest's own (on a clean clone, the largest files first; later,
 * the slowest), except that files needing the project's mlx-lm virtual environment start later,
 * and the environment is installed meanwhile in the background, beside the first test files.
 *
 * Why: a fresh install takes about 3 minutes here (pip downloads and byte-compiles mlx-lm and
 * MLX, then python imports them once), mostly waiting on the network and on one core. Done by the
 * first mlx-lm file, it held one of the test slots for all that time; done beside them, the
 * slots run other files meanwhile. The install takes the same lock the files take
 * (test/support/mlx-venv.ts), so a file that starts before it is done waits for it, as before.
 */
import { readFileSync } from "node:fs";
import { BaseSequencer, type TestSpecification } from "vitest/node";
import { ensureMlxVenv } from "./mlx-venv.js";

/** How many other files start before the first mlx-lm file (about 3.5 minutes of a clean-clone run here). */
const mlxFilesStartAfter = 24;

export default class MlxLaterSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    const needVenv = sorted.filter((spec) => needsMlxVenv(spec.moduleId));
    if (needVenv.length === 0) return sorted;
    startBackgroundInstall();
    const others = sorted.filter((spec) => !needVenv.includes(spec));
    const at = Math.min(mlxFilesStartAfter, others.length);
    return [...others.slice(0, at), ...needVenv, ...others.slice(at)];
  }
}

/** Whether a test file uses mlx-lm: it imports the virtual environment's helpers. */
function needsMlxVenv(file: string): boolean {
  return /from "\.\.\/support\/mlx-(lm|venv)\.js"/.test(readFileSync(file, "utf8"));
}

/**
 * Start installing the environment; the global teardown (test/support/global-setup.ts) waits for
 * it, so vitest never exits with pip half done. A failure is left to the files: each asks for the
 * environment itself and reports what went wrong.
 */
function startBackgroundInstall(): void {
  backgroundInstall.promise ??= ensureMlxVenv().then(
    () => undefined,
    () => undefined,
  );
}

/** Shared with the global teardown through globalThis: vitest may load the two modules apart. */
const backgroundInstall: { promise?: Promise<void> } = ((globalThis as { shardctlMlxVenvInstall?: { promise?: Promise<void> } }).shardctlMlxVenvInstall ??= {});
