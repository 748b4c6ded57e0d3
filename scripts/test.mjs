// `npm test` after the build: the suite as two vitest runs side by side (vitest.config.ts says which
// file goes where). The busy files compute (engines, daemons, mlx-lm) and run three at a time, as
// many as 2 cores take before the tests that judge timing suffer; the waiting files spend their time
// waiting on faults and deadlines (under half a core each, measured alone), and run two at a time beside them,
// where a fourth busy slot only slowed every file down. Arguments (`npm test -- <filter>…`) go to
// both runs. The busy run reports as it goes; the waiting run's report is printed whole once it ends,
// so the two never interleave. Exits non-zero if either run fails, or if no file matches the filters.
import { spawn } from "node:child_process";
import { Buffer } from "node:buffer";
import process from "node:process";
import { fileURLToPath, URL } from "node:url";

const args = process.argv.slice(2);
// A filter may match the files of one group only: the other then has nothing to run, which is no failure.
const filtered = args.some((arg) => !arg.startsWith("-"));
// The CLI file vitest's own `bin` runs (the package exports no path to it).
const vitest = fileURLToPath(new URL("../node_modules/vitest/vitest.mjs", import.meta.url));

const children = [];

/** One vitest run of `group`: its report streamed, or kept and printed when it ends; its exit code, and whether it found no file to run. */
function runGroup(group, stream) {
  const child = spawn(process.execPath, [vitest, "run", ...(filtered ? ["--passWithNoTests"] : []), ...args], {
    env: { ...process.env, SHARDCTL_TEST_GROUP: group },
    stdio: ["ignore", "pipe", "pipe"],
  });
  children.push(child);
  const kept = [];
  const take = (out) => (chunk) => {
    kept.push(chunk);
    if (stream) out.write(chunk);
  };
  child.stdout.on("data", take(process.stdout));
  child.stderr.on("data", take(process.stderr));
  return new Promise((resolve) => {
    child.on("close", (code, signal) => {
      const report = Buffer.concat(kept).toString("utf8");
      if (!stream) process.stdout.write(`\n── the ${group} test files ──\n${report}── end of the ${group} test files ──\n\n`);
      resolve({ code: code ?? (signal === null ? 1 : 128), none: report.includes("No test files found") });
    });
  });
}

// Ctrl-C reaches both runs through the terminal's process group; a SIGTERM sent to this process
// alone is passed on, so neither run is left behind.
const runs = Promise.all([runGroup("busy", true), runGroup("waiting", false)]);
process.on("SIGTERM", () => {
  for (const child of children) child.kill("SIGTERM");
});
const [busy, waiting] = await runs;
if (busy.none && waiting.none) {
  process.stderr.write(`no test file matches ${args.filter((arg) => !arg.startsWith("-")).join(" ")}\n`);
  process.exit(1);
}
process.exit(busy.code !== 0 ? busy.code : waiting.code);
