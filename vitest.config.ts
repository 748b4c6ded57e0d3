import { readFileSync, readdirSync } from "node:fs";
import { availableParallelism } from "node:os";
import { join } from "node:path";
import { configDefaults, defineConfig } from "vitest/config";
import MlxLaterSequencer from "./test/support/sequencer.js";

// Tests spawn real processes (engines, sshd, servers): generous per-test deadlines, and
// files run in forks so a crashed child never takes the runner with it.
//
// `npm test` (scripts/test.mjs) runs the suite as two vitest runs side by side, chosen by
// SHARDCTL_TEST_GROUP; `npx vitest` without it runs every file in one run, as before.
// - "busy": the files that compute, three at a time on a 2-core machine (cores + 1): most of a
//   file's time is still spent waiting on processes, sockets and deadlines, but four at a time
//   pushed the load past 10, tests that judge timing (a stalled computation's detection, a
//   cluster's first Healthy) failed, and every file took longer (the suite gained 30 s of 17 min).
// - "waiting": the files marked `// Test group: waiting` at the top, which mostly wait on faults and
//   deadlines (under half a core each, measured alone), two at a time beside the busy ones.
// Files that run side by side lease their own loopback addresses (test/support/test-world.ts),
// name namespaces by pid, and queue package installs (test/support/apt.ts); ports on 127.0.0.1 are
// picked free just before use.
const group = process.env.SHARDCTL_TEST_GROUP;
if (group !== undefined && group !== "busy" && group !== "waiting") throw new Error(`SHARDCTL_TEST_GROUP is "${group}": "busy", "waiting" or unset`);
const waiting = testFiles("test").filter((file) => /^\/\/ Test group: waiting\b/m.test(readFileSync(file, "utf8")));

export default defineConfig({
  // Each run keeps its own record of file durations (the order files start in): two runs writing
  // one record would each leave only their own files in it.
  ...(group === undefined ? {} : { cacheDir: `node_modules/.vite/${group}` }),
  test: {
    include: group === "waiting" ? waiting : ["test/**/*.test.ts"],
    exclude: group === "busy" ? [...configDefaults.exclude, ...waiting] : configDefaults.exclude,
    pool: "forks",
    // Files that need the mlx-lm environment start later, while it installs beside the others.
    sequence: { sequencer: MlxLaterSequencer },
    globalSetup: ["test/support/global-setup.ts"],
    maxWorkers: group === "waiting" ? 2 : availableParallelism() + 1,
    testTimeout: 60_000,
    hookTimeout: 120_000,
  },
});

/** Every `*.test.ts` under `dir`, as paths relative to the repository. */
function testFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? testFiles(join(dir, entry.name)) : entry.name.endsWith(".test.ts") ? [join(dir, entry.name)] : [],
  );
}
