import { availableParallelism } from "node:os";
import { defineConfig } from "vitest/config";
import MlxLaterSequencer from "./test/support/sequencer.js";

// Tests spawn real processes (engines, sshd, servers): generous per-test deadlines, and
// files run in forks so a crashed child never takes the runner with it.
//
// Test files run three at a time on a 2-core machine (cores + 1), where vitest's default (cores − 1)
// would run them one by one: most of a file's time is spent waiting on processes, sockets and
// deadlines, not computing (the whole suite two at a time kept the 2 cores 41 % busy: 17.8 min of
// CPU in 21.5 min). Four at a time pushed the load past 10 and tests that judge timing (a stalled
// computation's detection, a cluster's first Healthy) failed. Files that run side by side lease
// their own loopback addresses (test/support/test-world.ts), name namespaces by pid, and queue
// package installs (test/support/apt.ts); ports on 127.0.0.1 are picked free just before use.
export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    pool: "forks",
    // Files that need the mlx-lm environment start later, while it installs beside the others.
    sequence: { sequencer: MlxLaterSequencer },
    globalSetup: ["test/support/global-setup.ts"],
    maxWorkers: availableParallelism() + 1,
    testTimeout: 60_000,
    hookTimeout: 120_000,
  },
});
