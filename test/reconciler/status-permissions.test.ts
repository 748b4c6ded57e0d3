/**
 * A status file another user cannot open (a daemon of an earlier version, or one whose file an
 * operator made private) is said as a permission matter, never as a broken file to delete; a name
 * too long for the file system is no file at all. Read through the built module as user nobody,
 * as `shardctl status` run by another user reads it.
 */
import { execFile } from "node:child_process";
import { chmod, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, expect, test } from "vitest";
import { readStatus } from "../../src/reconciler/index.js";
import { requireBuild } from "../cli/support/run-shardctl.js";

const run = promisify(execFile);
let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "status-permissions-"));
  await chmod(dir, 0o755);
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

test("a status file this user may not open: said so, with what to do, and not 'delete it'", async () => {
  requireBuild();
  const file = join(dir, "private.status.json");
  await writeFile(file, "{}\n", { mode: 0o600 });
  await chmod(file, 0o600);
  const module = new URL("../../dist/src/reconciler/index.js", import.meta.url).pathname;
  const script = `import(${JSON.stringify(module)}).then((m) => m.readStatus(${JSON.stringify(file)})).then(() => console.log("read"), (e) => console.log(JSON.stringify({ reason: e.reason, message: e.message })))`;
  const { stdout } = await run(process.execPath, ["-e", script], { uid: 65534, gid: 65534 });
  const refusal = JSON.parse(stdout) as { reason: string; message: string };
  expect(refusal.reason).toBe("StatusFileUnreadable");
  expect(refusal.message).toMatch(
    /cannot be read by this user \(Error: EACCES.*\): it is the daemon's, written for its user; run this as that user, or give the file's group or others read access$/,
  );
  expect(refusal.message).not.toContain("delete it");
});

test("a name too long for the file system is no status file", async () => {
  expect(await readStatus(join(dir, `${"a".repeat(300)}.status.json`))).toBeUndefined();
});
