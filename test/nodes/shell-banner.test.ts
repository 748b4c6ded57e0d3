/**
 * A node whose shell start-up files print text (a banner in ~/.bashrc or ~/.zshenv, which bash and
 * zsh read for ssh commands too): every command sees it before its own output. Regression: the
 * first line was taken for the session's pid, so the command's output carried the real pid line, a
 * deadline could not kill what it stopped, and a launch read a shell's pid as its engine's (a
 * healthy cluster was called dead, and its teardown killed pids that were not its own). A real sshd
 * whose sessions run a start-up file (BASH_ENV) that prints two lines.
 */
import { copyFile, mkdtemp, rm, writeFile } from "node:fs/promises";
import { execFile } from "node:child_process";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, expect, it } from "vitest";
import { NodePool } from "../../src/nodes/index.js";
import { sshNodeConfig, sshNodeSettings, startSshdNodes, type SshdSet } from "../support/sshd.js";
import { requireBuild, shardctl } from "../cli/support/run-shardctl.js";

const run = promisify(execFile);
let dir: string;
let sshd: SshdSet;
let pool: NodePool;

beforeAll(async () => {
  requireBuild();
  dir = await mkdtemp(join(tmpdir(), "shardctl-shell-banner-"));
  // `banner-wait` is sleep under a name of this test's own, so the test can look for it and clean up.
  await copyFile("/bin/sleep", join(dir, "banner-wait"));
  await run("chmod", ["+x", join(dir, "banner-wait")]);
  // With the flag, a last word without a newline too (a terminal title, as a bashrc sets it).
  await writeFile(join(dir, "startup.sh"), `echo "Welcome to gpu-box"\necho "Last login: never"\n[ -e ${dir}/title ] && printf '\\033]0;gpu-box\\007'\n`);
  sshd = await startSshdNodes({ count: 1, setEnv: [`BASH_ENV=${join(dir, "startup.sh")}`], sftp: "shell" });
  pool = new NodePool({ knownHostsPath: sshd.knownHostsPath, sshConfigPath: join(sshd.root, "no-config") });
}, 60_000);

afterAll(async () => {
  await pool?.close();
  await sshd?.close();
  await run("pkill", ["-f", join(dir, "banner-wait")]).catch(() => undefined);
  await rm(dir, { recursive: true, force: true });
});

it("a command's output is its own, without the banner or the session's pid, and a deadline kills what it stopped", async () => {
  const node = pool.get(sshNodeConfig(sshd, 0));
  const echoed = await node.run(["echo", "hello"], { deadlineMs: 10_000 });
  expect(echoed.exitCode).toBe(0);
  expect(echoed.stdout).toBe("hello\n");
  // Set aside, not lost: what the shell printed is told apart.
  expect(echoed.preamble).toBe("Welcome to gpu-box\nLast login: never\n");
  // The output of a command that prints the marker's words itself is kept whole.
  const printed = await node.run(["printf", "@shardctl-pid:1\\nsecond\\n"], { deadlineMs: 10_000 });
  expect(printed.stdout).toBe("@shardctl-pid:1\nsecond\n");

  // Last words without a newline: the marker still begins a line of its own.
  await writeFile(join(dir, "title"), "");
  const titled = await node.run(["echo", "hello"], { deadlineMs: 10_000 });
  expect(titled.stdout).toBe("hello\n");
  expect(titled.preamble).toBe("Welcome to gpu-box\nLast login: never\n\u001b]0;gpu-box\u0007");

  const stopped = await node.run([join(dir, "banner-wait"), "30"], { deadlineMs: 1_000 });
  expect(stopped.timedOut).toBe(true);
  // Killed on the node, not left running.
  let left = "";
  for (let i = 0; i < 20; i++) {
    left = await run("pgrep", ["-f", join(dir, "banner-wait")]).then(
      (r) => r.stdout.trim(),
      () => "",
    );
    if (left === "") break;
    await new Promise((r) => setTimeout(r, 100));
  }
  expect(left).toBe("");
}, 60_000);

it("a file pushed over SFTP, whose server the shell starts, fails naming the start-up files that print", async () => {
  const node = pool.get(sshNodeConfig(sshd, 0));
  const error = await node.writeFile(join(dir, "pushed.txt"), "content").then(
    () => undefined,
    (e: Error) => e,
  );
  expect(error?.message).toMatch(/start-up files .* print/);
  expect(error?.message).toContain("internal-sftp");
}, 60_000);

it("`shardctl nodes` says the shell prints, quoting its first line, and where that breaks", async () => {
  const settings = join(dir, "shardctl.toml");
  await writeFile(settings, sshNodeSettings(sshd, 0));
  const said = await shardctl(["nodes", "--config", settings], { cwd: dir });
  expect(said.code, said.stderr).toBe(0);
  expect(said.stdout).toMatch(
    /^n1 .* its shell prints text for ssh sessions \("Welcome to gpu-box"\): commands work, but a push fails where sshd starts its SFTP server through the shell; see troubleshooting, "A shell that prints"$/m,
  );
  const json = JSON.parse((await shardctl(["nodes", "--json", "--config", settings], { cwd: dir })).stdout) as Array<{ shellPrints?: string }>;
  expect(json[0]!.shellPrints).toBe("Welcome to gpu-box");
}, 60_000);
