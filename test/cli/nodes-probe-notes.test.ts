/**
 * What `shardctl nodes` says of a node it could not probe: an identity_file that is not a regular
 * file (a FIFO used to hang it for ever) is refused at once, naming the setting and the path; a probe
 * that got no answer says so, not "exited with undefined".
 */
import { execFileSync } from "node:child_process";
import { mkdir, mkdtemp, realpath, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, test } from "vitest";
import { LocalNode, probeNode } from "../../src/nodes/index.js";
import { freePort } from "../support/free-ports.js";
import { requireBuild, shardctl } from "./support/run-shardctl.js";
import { generatePrivateKey } from "../support/ssh-key.js";

let root: string;
beforeAll(async () => {
  requireBuild();
  root = await realpath(await mkdtemp(join(tmpdir(), "shardctl-nodes-notes-")));
});
afterAll(async () => {
  if (root !== undefined) await rm(root, { recursive: true, force: true });
});

test("an identity_file that is a FIFO or a directory: refused at once, the setting and the path named; exit 1", async () => {
  execFileSync("mkfifo", [join(root, "key.fifo")]);
  await mkdir(join(root, "keydir"));
  const port = await freePort();
  const node = (name: string, key: string): string => `[nodes.${name}]\nhost = "127.0.0.1"\nport = ${port}\nidentity_file = "${key}"\nmodel_dir = "/tmp/m"\n`;
  await writeFile(
    join(root, "shardctl.toml"),
    `[ssh]\nknown_hosts = "known_hosts"\nconfig = "no-ssh-config"\n\n${node("fifo", "key.fifo")}\n${node("folder", "keydir")}`,
  );
  const started = Date.now();
  const run = await shardctl(["nodes", "--json"], { cwd: root });
  expect(Date.now() - started).toBeLessThan(10_000);
  expect(run.code).toBe(1);
  const rows = JSON.parse(run.stdout) as Array<{ name: string; reachable: boolean; error?: string }>;
  expect(rows.map((r) => [r.name, r.reachable, r.error])).toEqual([
    [
      "fifo",
      false,
      `node fifo: identity_file ${join(root, "key.fifo")}: the SSH private key is a FIFO (named pipe), not a regular file; only regular files are read — replace it with the file itself`,
    ],
    [
      "folder",
      false,
      `node folder: identity_file ${join(root, "keydir")}: the SSH private key is a directory, not a regular file; only regular files are read — replace it with the file itself`,
    ],
  ]);
});

test("a probe that got no answer within its deadline says where it stopped, and keeps what the steps before found", async () => {
  // The probe asks the engine binary for its version: one that never answers holds it past its deadline.
  const silent = join(root, "silent-engine");
  await writeFile(silent, "#!/bin/sh\nsleep 30\n", { mode: 0o755 });
  const probe = await probeNode(new LocalNode({ name: "here", host: "local", modelDir: root }), { deadlineMs: 1_000, engineBinary: silent });
  expect(probe.error).toBe(`the probe got no answer within 1000 ms: \`${silent} --version\` did not return`);
  expect(probe).toMatchObject({ reachable: true, accelerator: "cpu", memoryTotalBytes: expect.any(Number), diskFreeBytes: expect.any(Number) });
  expect(probe.engineVersion).toBeUndefined();
  // The deadline ended the probe's shell and what it ran: no `sleep 30` is left behind.
  const left = execFileSync("ps", ["-eo", "args="], { encoding: "utf8" })
    .split("\n")
    .filter((line) => line.includes(silent));
  expect(left).toEqual([]);
});

test("[ssh] known_hosts or config that is a FIFO: refused at once, not read for ever", async () => {
  for (const setting of ["known_hosts", "config"] as const) {
    const dir = join(root, `fifo-${setting}`);
    await mkdir(dir);
    execFileSync("mkfifo", [join(dir, "the.fifo")]);
    await writeFile(join(dir, "key"), generatePrivateKey(), { mode: 0o600 });
    const ssh = setting === "known_hosts" ? `known_hosts = "the.fifo"\nconfig = "no-ssh-config"` : `known_hosts = "known_hosts"\nconfig = "the.fifo"`;
    await writeFile(
      join(dir, "shardctl.toml"),
      `[ssh]\n${ssh}\n\n[nodes.n]\nhost = "127.0.0.1"\nport = ${await freePort()}\nidentity_file = "key"\nmodel_dir = "/tmp/m"\n`,
    );
    const started = Date.now();
    const run = await shardctl(["nodes", "--json"], { cwd: dir });
    expect(Date.now() - started, setting).toBeLessThan(10_000);
    expect(run.code, setting).toBe(1);
    const rows = JSON.parse(run.stdout) as Array<{ reachable: boolean; error?: string }>;
    expect(rows[0]?.reachable, setting).toBe(false);
    expect(rows[0]?.error, setting).toContain("a FIFO (named pipe), not a regular file");
  }
}, 60_000);

test("/dev/null as [ssh] known_hosts and config (OpenSSH's way to say none) is read as empty, not refused", async () => {
  const dir = join(root, "dev-null");
  await mkdir(dir);
  await writeFile(join(dir, "key"), generatePrivateKey(), { mode: 0o600 });
  await writeFile(
    join(dir, "shardctl.toml"),
    `[ssh]\nknown_hosts = "/dev/null"\nconfig = "/dev/null"\n\n[nodes.n]\nhost = "127.0.0.1"\nport = ${await freePort()}\nidentity_file = "key"\nmodel_dir = "/tmp/m"\n`,
  );
  const run = await shardctl(["nodes", "--json"], { cwd: dir });
  const rows = JSON.parse(run.stdout) as Array<{ reachable: boolean; error?: string }>;
  // Nothing listens on that port: the probe gets as far as connecting.
  expect(rows[0]?.error).not.toMatch(/not a regular file/);
  expect(rows[0]?.error).toMatch(/cannot connect to 127\.0\.0\.1/);
});

test("an engine whose version line carries terminal sequences: `shardctl nodes` prints them escaped", async () => {
  const dir = join(root, "hostile-version");
  await mkdir(dir);
  // A window title, a screen clear and a right-to-left override in what --version prints.
  const engine = join(dir, "engine");
  await writeFile(engine, "#!/bin/sh\nprintf '\\033]0;pwned\\007\\033[2J\\342\\200\\256evil 1.0\\n'\n", { mode: 0o755 });
  await writeFile(join(dir, "shardctl.toml"), `[nodes.here]\nhost = "local"\nmodel_dir = "${dir}"\n`);
  const run = await shardctl(["nodes", "--engine-binary", engine], { cwd: dir });
  expect(run.code, run.stderr).toBe(0);
  // eslint-disable-next-line no-control-regex -- matching control characters is the point
  expect(run.stdout).not.toMatch(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e]/);
  expect(run.stdout).toContain("\\u001b]0;pwned\\u0007\\u001b[2J\\u202eevil 1.0");
});
