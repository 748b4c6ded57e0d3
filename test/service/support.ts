/**
 * Real readers of service files for the tests: systemd's own tools (Debian's `systemd` package is
 * installed when systemd-analyze is missing and we are root; otherwise set-up fails naming it) and
 * Python's plistlib, a real plist reader. Nothing here is a stand-in for the code under test.
 */
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { chmod, chown, mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { aptInstall } from "../support/apt.js";

export const repoRoot = fileURLToPath(new URL("../../", import.meta.url));
export const shardctlScript = join(repoRoot, "dist/src/cli/shardctl.js");

/**
 * A directory name holding what means something to systemd (spaces, quotes, `%` before a space and
 * before a specifier letter, `$NAME`, a backslash), to XML (`&`, `<`) and to a shell.
 */
export const awkwardName = `it's a "dir" 50% %n $HOME & <x>\\y`;

export interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** `file args…` as a real process; never rejects on a non-zero exit. */
export function runFile(file: string, args: readonly string[], options: { env?: NodeJS.ProcessEnv; input?: string; cwd?: string } = {}): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = execFile(
      file,
      args,
      { env: options.env ?? process.env, cwd: options.cwd ?? repoRoot, timeout: 120_000, maxBuffer: 64 << 20 },
      (error, stdout, stderr) => {
        if (error !== null && typeof error.code !== "number") {
          reject(new Error(`${file} ${args.join(" ")}: ${error.message}\n${stderr}`));
          return;
        }
        resolve({ code: error === null ? 0 : (error.code as number), stdout, stderr });
      },
    );
    if (options.input !== undefined) child.stdin?.end(options.input);
  });
}

/** The built CLI (run `npm run build` first). */
export function shardctl(args: readonly string[], env: NodeJS.ProcessEnv, cwd?: string): Promise<Run> {
  if (!existsSync(shardctlScript)) throw new Error(`${shardctlScript} is missing: run \`npm run build\` first`);
  return runFile(process.execPath, [shardctlScript, ...args], { env, ...(cwd === undefined ? {} : { cwd }) });
}

const systemdAnalyze = "/usr/bin/systemd-analyze";
const systemdBinary = ["/lib/systemd/systemd", "/usr/lib/systemd/systemd"];

/**
 * systemd-analyze and the systemd binary, installed from Debian's `systemd` package when missing.
 * The package only adds the tools here: systemd does not become the init system without
 * `systemd-sysv`, so nothing else on the machine changes.
 */
export async function ensureSystemdTools(): Promise<void> {
  if (existsSync(systemdAnalyze) && systemdBinary.some((path) => existsSync(path))) return;
  if (process.getuid?.() !== 0) throw new Error(`${systemdAnalyze} is missing: install Debian's "systemd" package (apt-get install -y systemd)`);
  await aptInstall(["systemd"], ["--no-install-recommends"]).catch((error: unknown) => {
    throw new Error(`installing Debian's "systemd" package failed:\n${error instanceof Error ? error.message : String(error)}`);
  });
  if (!existsSync(systemdAnalyze)) throw new Error(`installing Debian's "systemd" package did not provide ${systemdAnalyze}`);
}

/** `systemd-analyze [--user] verify <unit>`: exit code and what it printed. */
export async function verifyUnit(unitFile: string, domain: "system" | "user"): Promise<Run> {
  // The user manager's lookup needs a runtime directory even offline.
  const runtime = await mkdtemp(join(tmpdir(), "shardctl-xdg-runtime-"));
  await chmod(runtime, 0o700);
  const args = domain === "user" ? ["--user", "verify", unitFile] : ["verify", unitFile];
  return runFile(systemdAnalyze, args, { env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: runtime, XDG_RUNTIME_DIR: runtime } });
}

/** What systemd itself read from a unit: the settings, and ExecStart's words. */
export interface UnitReadBack {
  description: string;
  workingDirectory: string;
  environment: string;
  environmentFile: string;
  /** ExecStart's words as systemd passes them to execve (`$$` already made `$`). */
  argv: string[];
}

/**
 * Loads the unit with systemd's own parser (`systemd --test --user`, which loads the units of
 * SYSTEMD_UNIT_PATH and dumps what it parsed) and reads back its settings. systemd refuses test mode
 * as root, so as root it runs as nobody; the unit's directory must be world-readable.
 */
export async function readBackUnit(unitDir: string, unitName: string): Promise<UnitReadBack> {
  const binary = systemdBinary.find((path) => existsSync(path));
  if (binary === undefined) throw new Error('the systemd binary is missing: install Debian\'s "systemd" package');
  const runtime = await mkdtemp(join(tmpdir(), "shardctl-xdg-runtime-"));
  const asRoot = process.getuid?.() === 0;
  if (asRoot) await chown(runtime, 65534, 65534);
  const env = { PATH: "/usr/bin:/bin", HOME: runtime, XDG_RUNTIME_DIR: runtime, SYSTEMD_UNIT_PATH: `${unitDir}:`, SYSTEMD_LOG_LEVEL: "err" };
  const command = [binary, "--test", "--user", `--unit=${unitName}`, "--no-pager"];
  const run = asRoot
    ? await runFile("setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", "env", "-i", ...Object.entries(env).map(([k, v]) => `${k}=${v}`), ...command])
    : await runFile(command[0]!, command.slice(1), { env });
  if (run.code !== 0) throw new Error(`systemd --test failed (${run.code}):\n${run.stderr}`);
  const dump = `${run.stdout}\n${run.stderr}`;
  const start = dump.indexOf(`-> Unit ${unitName}:`);
  if (start < 0) throw new Error(`systemd did not load ${unitName}:\n${dump.slice(0, 2000)}`);
  const next = dump.indexOf("-> Unit ", start + 1);
  const block = dump.slice(start, next < 0 ? undefined : next);
  const field = (name: string): string => {
    const match = new RegExp(`^\\s*${name}: (.*)$`, "m").exec(block);
    if (match === null) throw new Error(`no ${name} in systemd's dump of ${unitName}:\n${block}`);
    return match[1]!;
  };
  // The dump quotes each word for a shell ("…" with \-escapes); variables are expanded only at exec
  // time, so that step is done here by systemd's rule (systemd.service, "Command lines").
  const argv = splitDumpedCommandLine(field("Command Line")).map(expandLikeExec);
  return {
    description: field("Description"),
    workingDirectory: field("WorkingDirectory"),
    environment: field("Environment"),
    environmentFile: field("EnvironmentFile"),
    argv,
  };
}

/**
 * What systemd makes of a word at exec time: "$$" is a "$", and `$NAME` or `${NAME}` is replaced by
 * the variable's value — shown here as «NAME», which no expected value contains, so a `$` that
 * should have been written `$$` shows.
 */
function expandLikeExec(word: string): string {
  return word.replace(/\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)/g, (match, braced?: string, bare?: string) =>
    match === "$$" ? "$" : `«${braced ?? bare}»`,
  );
}

/** Words of a command line as systemd's dump prints them: bare, or double-quoted with backslash escapes. */
function splitDumpedCommandLine(line: string): string[] {
  const words: string[] = [];
  let i = 0;
  while (i < line.length) {
    if (line[i] === " ") {
      i++;
      continue;
    }
    let word = "";
    if (line[i] === '"') {
      i++;
      while (i < line.length && line[i] !== '"') {
        if (line[i] === "\\") i++;
        word += line[i];
        i++;
      }
      i++;
    } else {
      while (i < line.length && line[i] !== " ") word += line[i++];
    }
    words.push(word);
  }
  return words;
}

/** A plist read with Python's plistlib (a real plist reader), as JSON. */
export async function readPlist(file: string): Promise<Record<string, unknown>> {
  const script = "import json, plistlib, sys\nwith open(sys.argv[1], 'rb') as f:\n    print(json.dumps(plistlib.load(f, fmt=plistlib.FMT_XML)))";
  const run = await runFile("python3", ["-c", script, file]);
  if (run.code !== 0) throw new Error(`plistlib refused ${file}:\n${run.stderr}`);
  return JSON.parse(run.stdout) as Record<string, unknown>;
}
