/**
 * createLogger in a real process (it writes to file descriptor 2): secrets never reach a line, and
 * with a file the file keeps every line as JSON while stderr gets only the chosen levels (the demo's
 * arrangement).
 */
import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, expect, test } from "vitest";
import { repoRoot } from "../reconciler/daemon-fixture.js";

const loggerJs = join(repoRoot, "dist/src/cli/logger.js");
const roots: string[] = [];
afterAll(async () => {
  for (const root of roots) await rm(root, { recursive: true, force: true });
});

/** Runs `body` (ES module code with `createLogger` in scope) in a fresh node; its stderr. */
async function withLogger(body: string): Promise<string> {
  const script = `import { createLogger } from ${JSON.stringify(loggerJs)};\n${body}`;
  const env = { ...process.env };
  for (const name of ["FORCE_COLOR", "NO_COLOR", "SHARDCTL_LOG_LEVEL"]) delete env[name];
  const { stderr } = await promisify(execFile)(process.execPath, ["--input-type=module", "-e", script], { env });
  return stderr;
}

test.each(["json", "pretty"])("%s: a secret logged by mistake is redacted, at the top level and one level down", async (format) => {
  const stderr = await withLogger(
    `createLogger("t", { format: ${JSON.stringify(format)} }).warn({ token: "hf_s3cret", request: { authorization: "Bearer s3cret", url: "/v1" } }, "sent");`,
  );
  expect(stderr).toContain("sent");
  expect(stderr).toContain("/v1");
  expect(stderr).not.toContain("s3cret");
  expect(stderr).toContain("[redacted]");
});

test("with a file: every line there as JSON, only warnings and errors on stderr, as human lines", async () => {
  const root = await mkdtemp(join(tmpdir(), "shardctl-logger-"));
  roots.push(root);
  const file = join(root, "logs", "daemon.log");
  const stderr = await withLogger(
    `const log = createLogger("t", { format: "pretty", file: ${JSON.stringify(file)}, stderrLevel: "warn" });
     log.info({ cluster: "demo" }, "pass"); log.warn({ cluster: "demo" }, "launch failed"); log.error("boom");`,
  );
  expect(stderr).toMatch(/^\d\d:\d\d:\d\d\.\d{3} WARN {2}launch failed cluster=demo\n\d\d:\d\d:\d\d\.\d{3} ERROR boom\n$/);
  const lines = (await readFile(file, "utf8"))
    .trim()
    .split("\n")
    .map((line) => JSON.parse(line) as { msg: string; level: number });
  expect(lines.map((line) => [line.level, line.msg])).toEqual([
    [30, "pass"],
    [40, "launch failed"],
    [50, "boom"],
  ]);
});
