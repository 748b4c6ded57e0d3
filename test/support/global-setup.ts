/**
 * Once per test run, in vitest's own process: at the end, wait for the background install of the
 * mlx-lm environment that the sequencer may have started (test/support/sequencer.ts), so the run
 * never ends with pip killed half way.
 */
export async function teardown(): Promise<void> {
  await (globalThis as { shardctlMlxVenvInstall?: { promise?: Promise<void> } }).shardctlMlxVenvInstall?.promise;
}
