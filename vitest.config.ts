import { availableParallelism } from "node:os";
import { defineConfig } from "vitest/config";

// Tests spawn real processes (engines, sshd, servers): generous per-test deadlines, and
// files run in forks so a crashed child never takes the runner with it.
//
// Test files run four at a time on a 2-core machine (cores + 2), where vitest's default (cores − 1)
// would run them one by one: most of a file's time is spent waiting on processes, sockets and
// deadlines, not computing (the whole suite three at a time kept the 2 cores 61 % busy: 25.8 min of
// CPU in 21.2 min on a machine with a third of the memory bandwidth of an earlier one). Files that
// run side by side lease
// their own loopback addresses (test/support/test-world.ts), name namespaces by pid, and queue
// package installs (test/support/apt.ts); ports on 127.0.0.1 are picked free just before use.
export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    pool: "forks",
    maxWorkers: availableParallelism() + 2,
    testTimeout: 60_000,
    hookTimeout: 120_000,
  },
});
