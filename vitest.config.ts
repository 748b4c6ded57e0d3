import { availableParallelism } from "node:os";
import { defineConfig } from "vitest/config";
import MlxLaterSequencer from "./test/support/sequencer.js";

// Tests spawn real processes (engines, sshd, servers): generous per-test deadlines, and
// files run in forks so a crashed child never takes the runner with it.
//
// Test files run four at a time on a 2-core machine (cores + 2), where vitest's default (cores − 1)
// would run them one by one: most of a file's time is spent waiting on processes, sockets and
// deadlines, not computing. Measured on one clean clone, one run after the other: three at a time
// took 1 051 s and kept the 2 cores 58 % busy (21 min of CPU); four at a time took 944 s, every test
// passing, with a load average near 8. An earlier suite failed tests that judge timing (a stalled
// computation's detection, a cluster's first Healthy) at four; every clean run at four since has
// passed them. Five at a time was no faster (1 123 s against 1 107 s at four, one run each: the 2
// cores are busy at four) and failed a timing test. A test that judges timing must hold under that
// load. Files that run side by side lease their own loopback addresses (test/support/test-world.ts),
// name namespaces by pid, and queue package installs (test/support/apt.ts); ports on 127.0.0.1 are
// picked free just before use.
export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    pool: "forks",
    // Files that need the mlx-lm environment start later, while it installs beside the others.
    sequence: { sequencer: MlxLaterSequencer },
    globalSetup: ["test/support/global-setup.ts"],
    maxWorkers: availableParallelism() + 2,
    testTimeout: 60_000,
    hookTimeout: 120_000,
  },
});
