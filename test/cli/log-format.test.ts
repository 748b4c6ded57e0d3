/**
 * `--log-format json|pretty` and the default between them, on real `shardctl daemon` and
 * `shardctl router` processes: a short-lived daemon on an empty directory of definitions, stopped
 * with SIGTERM; a terminal is a real pseudo-terminal made by util-linux `script`. Also: the router's
 * bind error names the setting that holds its address.
 */
import { spawn } from "node:child_process";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { createServer, type AddressInfo, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { repoRoot } from "../reconciler/daemon-fixture.js";
import { allocateHost } from "../support/test-world.js";

const shardctl = join(repoRoot, "dist/src/cli/shardctl.js");
// eslint-disable-next-line no-control-regex -- matching terminal escape codes is the point
const escapeCode = /\u001b\[[0-9;]*m/g;
const prettyLine = (message: string): RegExp => new RegExp(`^\\d\\d:\\d\\d:\\d\\d\\.\\d{3} INFO  ${message}`, "m");

const roots: string[] = [];
const holders: Server[] = [];
afterAll(async () => {
  for (const holder of holders) holder.close();
  for (const root of roots) await rm(root, { recursive: true, force: true });
});

/** A directory with a minimal settings file and an empty clusters/ beside it. */
async function daemonRoot(): Promise<string> {
  const root = await mkdtemp(join(tmpdir(), "shardctl-log-format-"));
  roots.push(root);
  await mkdir(join(root, "clusters"));
  await writeFile(join(root, "shardctl.toml"), '[daemon]\nstate_dir = "state"\n');
  return root;
}

/**
 * This process's environment without the variables under test, plus `extra`. Node's colour rule also
 * reads `CI` (a CI runner counts as a 2-colour terminal), `TMUX`, `COLORTERM` and `TEAMCITY_VERSION`:
 * they are dropped too, so the test sees the same rule on a CI runner as on a desk.
 */
function environment(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env = { ...process.env };
  const colourHints = ["CI", "TMUX", "COLORTERM", "TEAMCITY_VERSION", "TF_BUILD"];
  for (const name of ["FORCE_COLOR", "NO_COLOR", "NODE_DISABLE_COLORS", "SHARDCTL_LOG_LEVEL", "TERM", ...colourHints]) delete env[name];
  return { ...env, ...extra };
}

type Finished = { code: number | null; stdout: string; stderr: string };

/**
 * Runs `command` (argv) in `root` until its output contains `ready`, then SIGTERMs the process whose
 * pid `pidOf` gives (default the child itself) and waits for the exit.
 */
async function runUntil(root: string, command: string[], env: NodeJS.ProcessEnv, ready: string, pidOf?: () => Promise<number>): Promise<Finished> {
  const child = spawn(command[0]!, command.slice(1), { cwd: root, env, stdio: ["ignore", "pipe", "pipe"] });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString("utf8")));
  child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString("utf8")));
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  const deadline = Date.now() + 20_000;
  while (!(stdout + stderr).includes(ready) && child.exitCode === null && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  if (child.exitCode === null) {
    const pid = pidOf === undefined ? child.pid! : await pidOf();
    process.kill(pid, "SIGTERM");
  }
  const code = await Promise.race([exited, new Promise<"hung">((resolve) => setTimeout(() => resolve("hung"), 20_000))]);
  if (code === "hung") {
    child.kill("SIGKILL");
    throw new Error(`still running 20 s after SIGTERM:\n${stdout}\n${stderr}`);
  }
  return { code, stdout, stderr };
}

function runDaemon(root: string, args: string[], env = environment()): Promise<Finished> {
  return runUntil(root, [process.execPath, shardctl, "daemon", ...args], env, "daemon watching");
}

/**
 * `shardctl daemon` with its stdout and stderr on a real terminal: `script` runs it on a fresh
 * pseudo-terminal and copies what it shows to its own stdout (line ends as \r\n).
 */
async function runDaemonOnTerminal(root: string, env: NodeJS.ProcessEnv): Promise<Finished> {
  const pidFile = join(root, "daemon.pid");
  // exec: the shell's pid becomes the daemon's, so the SIGTERM reaches the daemon itself.
  const inner = `echo $$ > '${pidFile}'; exec '${process.execPath}' '${shardctl}' daemon`;
  const finished = await runUntil(root, ["script", "-qefc", inner, "/dev/null"], { ...env, SHELL: "/bin/sh" }, "daemon watching", async () =>
    Number((await readFile(pidFile, "utf8")).trim()),
  );
  return { ...finished, stdout: finished.stdout.replace(/\r\n/g, "\n") };
}

/** Non-empty lines that are not JSON objects. */
function nonJsonLines(output: string): string[] {
  return output
    .split("\n")
    .filter((line) => line !== "")
    .filter((line) => {
      try {
        const parsed: unknown = JSON.parse(line);
        return typeof parsed !== "object" || parsed === null;
      } catch {
        return true;
      }
    });
}

describe("shardctl daemon's log format", () => {
  test("--log-format json: every line on stderr is a JSON object, start and stop included", async () => {
    const r = await runDaemon(await daemonRoot(), ["--log-format", "json"]);
    expect(r.code, r.stderr).toBe(0);
    expect(nonJsonLines(r.stderr)).toEqual([]);
    const messages = r.stderr
      .trim()
      .split("\n")
      .map((line) => (JSON.parse(line) as { msg: string }).msg);
    expect(messages).toContain("daemon watching");
    expect(messages).toContain("daemon stopped");
  });

  test("--log-format pretty: human lines (time, level, message, fields), no JSON, no colour through a pipe", async () => {
    const root = await daemonRoot();
    const r = await runDaemon(root, ["--log-format", "pretty"]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toMatch(prettyLine(`daemon watching dir=${join(root, "clusters")}$`));
    expect(r.stderr).toMatch(prettyLine("daemon stopped$"));
    expect(r.stderr).not.toMatch(/^\{/m);
    expect(r.stderr).not.toMatch(escapeCode);
  });

  test("FORCE_COLOR colours pretty lines even through a pipe; FORCE_COLOR=0 does not", async () => {
    const forced = await runDaemon(await daemonRoot(), ["--log-format", "pretty"], environment({ FORCE_COLOR: "1" }));
    expect(forced.code, forced.stderr).toBe(0);
    expect(forced.stderr).toMatch(escapeCode);
    expect(forced.stderr.replace(escapeCode, "")).toMatch(prettyLine("daemon watching"));
    const off = await runDaemon(await daemonRoot(), ["--log-format", "pretty"], environment({ FORCE_COLOR: "0" }));
    expect(off.stderr).toMatch(prettyLine("daemon watching"));
    expect(off.stderr).not.toMatch(escapeCode);
  });

  test("no flag, stderr a pipe (a service manager, a collector): JSON lines", async () => {
    const r = await runDaemon(await daemonRoot(), []);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toContain('"msg":"daemon watching"');
    expect(nonJsonLines(r.stderr)).toEqual([]);
  });

  test("no flag, on a terminal that has colours: coloured human lines; NO_COLOR removes the colour, not the format", async () => {
    const coloured = await runDaemonOnTerminal(await daemonRoot(), environment({ TERM: "xterm-256color" }));
    expect(coloured.code, coloured.stdout).toBe(0);
    expect(coloured.stdout).toMatch(escapeCode);
    expect(coloured.stdout.replace(escapeCode, "")).toMatch(prettyLine("daemon watching dir="));
    expect(coloured.stdout).not.toMatch(/^\{/m);

    const plain = await runDaemonOnTerminal(await daemonRoot(), environment({ TERM: "xterm-256color", NO_COLOR: "1" }));
    expect(plain.code, plain.stdout).toBe(0);
    expect(plain.stdout).toMatch(prettyLine("daemon watching dir="));
    expect(plain.stdout).not.toMatch(escapeCode);
  });

  test("a terminal without colours (TERM=dumb): human lines, no colour", async () => {
    const r = await runDaemonOnTerminal(await daemonRoot(), environment({ TERM: "dumb" }));
    expect(r.code, r.stdout).toBe(0);
    expect(r.stdout).toMatch(prettyLine("daemon watching dir="));
    expect(r.stdout).not.toMatch(escapeCode);
  });

  test("--log-format with another value is a usage error naming both formats", async () => {
    const r = await runDaemon(await daemonRoot(), ["--log-format", "xml"]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('expected --log-format to be json or pretty, got "xml"');
  });
});

describe("shardctl router", () => {
  let host: string;
  beforeAll(async () => {
    host = await allocateHost();
  });

  /** A router config in a fresh directory whose server.bind_address is `bind`. */
  async function routerConfig(bind: string): Promise<{ root: string; file: string }> {
    const root = await mkdtemp(join(tmpdir(), "shardctl-log-format-router-"));
    roots.push(root);
    const file = join(root, "router.yaml");
    await writeFile(file, `server:\n  bind_address: "${bind}"\nbackends: []\n`);
    return { root, file };
  }

  /** A real listener on the leased host, on a port the kernel picked, as another program would hold it. */
  async function holdPort(): Promise<number> {
    const holder = createServer();
    holders.push(holder);
    await new Promise<void>((resolve) => holder.listen(0, host, resolve));
    return (holder.address() as AddressInfo).port;
  }

  test("--log-format pretty: the listening line for people, with its URL", async () => {
    const { root, file } = await routerConfig(`${host}:0`);
    const r = await runUntil(root, [process.execPath, shardctl, "router", "--config", file, "--log-format", "pretty"], environment(), "router listening");
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toMatch(prettyLine(`router listening url=http://${host.replace(/\./g, "\\.")}:\\d+ config=`));
    expect(r.stderr).not.toMatch(/^\{/m);
  });

  test("its port taken: exit 1 naming server.bind_address and the config file", async () => {
    const taken = await holdPort();
    const { root, file } = await routerConfig(`${host}:${taken}`);
    const r = await runUntil(root, [process.execPath, shardctl, "router", "--config", file], environment(), "router listening");
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`router cannot listen on ${host}:${taken}`);
    expect(r.stderr).toContain(`the address is set by server.bind_address in ${file}: choose a free port, or stop what holds it`);
  });

  test("its port taken when --port set it: exit 1 naming the flags, not the file", async () => {
    const taken = await holdPort();
    const { root, file } = await routerConfig(`${host}:0`);
    const r = await runUntil(root, [process.execPath, shardctl, "router", "--config", file, "--port", String(taken)], environment(), "router listening");
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`router cannot listen on ${host}:${taken}`);
    expect(r.stderr).toContain("the address is set by --host/--port");
  });
});
