import { defineConfig } from "vitest/config";

// Tests spawn real processes (engines, sshd, servers): generous per-test deadlines, and
// files run in forks so a crashed child never takes the runner with it.
export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    pool: "forks",
    testTimeout: 60_000,
    hookTimeout: 120_000,
  },
});
