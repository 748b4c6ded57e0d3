/**
 * The world of the reconciler tests and bench/reconciler.ts: a temp root holding a git repository
 * with clusters/, a settings file, a state dir and a tiny test model (source = "path": the loopback
 * SSH nodes share this file system); optionally real sshd nodes on loopback addresses leased for this
 * world alone (test/support/test-world.ts), which the settings file names as the nodes' hosts. The daemon runs
 * in-process (`startDaemon`) or as a real process (`node dist/src/cli/shardctl.js daemon`). Every
 * status file the daemon writes is checked against schemas/status.schema.json as it appears
 * (`StatusAudit`). No vitest imports: the bench uses it too. Run `npm run build` first.
 */
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { existsSync, readFileSync, watch, type FSWatcher } from "node:fs";
import { mkdir, mkdtemp, open, readFile, rename, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { promisify } from "node:util";
import { Ajv2020 } from "ajv/dist/2020.js";
import { pino } from "pino";
import { bundledShardEngine, bundledShardEngineCommand } from "../../src/launch/index.js";
import { makeTestModel } from "../../src/planner/test-model/index.js";
import { startDaemon, type Daemon, type DaemonOptions, type ClusterStatus } from "../../src/reconciler/index.js";
import { computeRevision, formatIssue, loadCluster, loadSettings } from "../../src/spec/index.js";
import { freePort as freeLoopbackPort, freePortRun } from "../support/free-ports.js";
import { allocateHost } from "../support/test-world.js";
import { startSshdNodes, type SshdSet } from "../support/sshd.js";

const run = promisify(execFile);
/** The repository root, from test/reconciler (vitest) or dist/test/reconciler (the built bench). */
export const repoRoot = findRepoRoot(import.meta.dirname);
export const shardctlJs = join(repoRoot, "dist/src/cli/shardctl.js");
const statusSchemaFile = join(repoRoot, "schemas/status.schema.json");

export interface DaemonWorld {
  root: string;
  clustersDir: string;
  stateDir: string;
  settingsFile: string;
  modelDir: string;
  modelName: string;
  routerConfig: string;
  /** Loopback SSH nodes (n1, n2, …), when asked for. */
  sshd?: SshdSet;
  /** Node name → bind address (a leased loopback address), for SSH nodes. */
  hosts: Map<string, string>;
  audit: StatusAudit;
  close(): Promise<void>;
}

export interface WorldOptions {
  /** Number of SSH nodes n1..nN. Default 0 (plan-only worlds use local nodes l1, l2). */
  sshNodes?: number;
  /**
   * @deprecated Ignored: the SSH nodes' addresses are leased with allocateHosts (test/support/test-world.ts)
   * so parallel test files never share one; accepted so older callers still compile.
   */
  firstHost?: number;
  /** Model layers. Default 4. */
  layers?: number;
  /** The model's hidden size (its heads 16 wide): an activation frame carries this many values per token. Default 64. */
  hidden?: number;
}

export async function startWorld(options: WorldOptions = {}): Promise<DaemonWorld> {
  if (!existsSync(bundledShardEngine)) throw new Error(`${bundledShardEngine} is missing: run \`npm run build\` first`);
  const root = await mkdtemp(join(tmpdir(), "shardctl-reconciler-"));
  const clustersDir = join(root, "clusters");
  const stateDir = join(root, "state");
  await mkdir(clustersDir, { recursive: true });
  await run("git", ["init", "-q", root]);
  const modelName = "tiny-llama";
  const modelDir = join(root, "models", modelName);
  const hidden = options.hidden ?? 64;
  await makeTestModel(modelDir, { layers: options.layers ?? 4, hidden, heads: hidden / 16, kvHeads: 2, vocab: 320, seed: 11 });
  const routerConfig = join(root, "router.yaml");
  await writeFile(routerConfig, `# reconciler test router\nserver:\n  bind_address: "127.0.0.1:0"\nbackends: []\n`);
  const sshd = (options.sshNodes ?? 0) > 0 ? await startSshdNodes({ count: options.sshNodes! }) : undefined;
  const hosts = new Map<string, string>();
  sshd?.nodes.forEach((n, i) => hosts.set(`n${i + 1}`, n.host));
  const world: DaemonWorld = {
    root,
    clustersDir,
    stateDir,
    settingsFile: join(root, "shardctl.toml"),
    modelDir,
    modelName,
    routerConfig,
    ...(sshd === undefined ? {} : { sshd }),
    hosts,
    audit: new StatusAudit(clustersDir),
    async close() {
      world.audit.close();
      await sshd?.close();
      await rm(root, { recursive: true, force: true });
    },
  };
  await writeSettings(world);
  return world;
}

export interface SettingsOptions {
  /** `[distributed] enabled`. Default true when the world has SSH nodes. */
  enabled?: boolean;
  restartBudget?: number;
  /** `[daemon] restart_budget_reset_seconds`. Default: the settings' default. */
  restartBudgetResetSeconds?: number;
  allowMassPrune?: boolean;
  /** Register clusters with the embedded router (true), or in the world's router YAML with no router run by the daemon ("external"). Default false. */
  router?: boolean | "external";
  /** Extra lines appended verbatim. */
  extra?: string;
  /** Every node's declared `memory` (it caps the probed budget), e.g. "512KiB". Default "4GiB". */
  nodeMemory?: string;
  /** `[daemon] heartbeat_seconds`. Default: the settings' default. */
  heartbeatSeconds?: number;
  /** `[daemon] cut_off_grace_seconds`. Default: the settings' default. */
  cutOffGraceSeconds?: number;
}

/** Write shardctl.toml: the SSH nodes n1.. (or local nodes l1, l2) and the daemon's state dir. */
export async function writeSettings(world: DaemonWorld, options: SettingsOptions = {}): Promise<void> {
  const lines = [
    "[distributed]",
    `enabled = ${options.enabled ?? world.sshd !== undefined}`,
    "",
    "[daemon]",
    `state_dir = ${JSON.stringify(world.stateDir)}`,
    `restart_budget = ${options.restartBudget ?? 3}`,
    `allow_mass_prune = ${options.allowMassPrune ?? false}`,
    ...(options.restartBudgetResetSeconds === undefined ? [] : [`restart_budget_reset_seconds = ${options.restartBudgetResetSeconds}`]),
    ...(options.heartbeatSeconds === undefined ? [] : [`heartbeat_seconds = ${options.heartbeatSeconds}`]),
    ...(options.cutOffGraceSeconds === undefined ? [] : [`cut_off_grace_seconds = ${options.cutOffGraceSeconds}`]),
    "",
  ];
  if (options.router === true) {
    lines.push("[router]", 'kind = "continuum"', `config = ${JSON.stringify(world.routerConfig)}`, "embedded = true", "");
  } else if (options.router === "external") {
    lines.push("[router]", 'kind = "continuum"', `config = ${JSON.stringify(world.routerConfig)}`, "");
  }
  if (world.sshd !== undefined) {
    lines.push("[ssh]", `known_hosts = ${JSON.stringify(world.sshd.knownHostsPath)}`, `config = ${JSON.stringify(join(world.root, "no-ssh-config"))}`, "");
    world.sshd.nodes.forEach((n, i) => {
      lines.push(
        `[nodes.n${i + 1}]`,
        `host = "${n.host}"`,
        `port = ${n.port}`,
        `user = ${JSON.stringify(n.user)}`,
        `identity_file = ${JSON.stringify(world.sshd!.identityFile)}`,
        `model_dir = ${JSON.stringify(n.modelDir)}`,
        `memory = ${JSON.stringify(options.nodeMemory ?? "4GiB")}`,
        'accelerator = "cpu"',
        "",
      );
    });
  } else {
    for (const name of ["l1", "l2"]) {
      lines.push(
        `[nodes.${name}]`,
        'host = "local"',
        `model_dir = ${JSON.stringify(join(world.root, "nodes", name))}`,
        `memory = ${JSON.stringify(options.nodeMemory ?? "4GiB")}`,
        'accelerator = "cpu"',
        "",
      );
    }
  }
  if (options.extra !== undefined) lines.push(options.extra);
  await writeFile(world.settingsFile, lines.join("\n"));
}

export interface DefinitionOptions {
  nodes: string[];
  desired?: "running" | "stopped";
  suspend?: boolean;
  /** Coordinator HTTP port. Default 8080 (plan-only worlds never bind it). */
  port?: number;
  /** Transport port range "a-b". */
  portRange?: string;
  /** Coordinator node. Default "local". */
  coordinatorNode?: string;
  /** Model context length (a knob that changes the revision without changing nodes). */
  contextLength?: number;
  register?: boolean;
  /** `[router] backend`; default the cluster's name. */
  backend?: string;
  /** Extra engine arguments. */
  extraArgs?: string[];
  /** `[engine] binary` (a stand-in script); default the bundled shard-engine. */
  binary?: string;
  /** `[engine] version`: the version every node must report. Default none. */
  version?: string;
  /** `[model] id`. Default the world's model directory (an absolute path); a relative path resolves against the settings file's directory. */
  modelId?: string;
  /** `[model] source`: "push" copies the model to each node's model_dir, "hub" downloads `modelId` there from `[hub] endpoint`. Default "path" (used where it lies). */
  modelSource?: "path" | "push" | "hub";
}

export function definitionText(world: DaemonWorld, o: DefinitionOptions): string {
  const extraArgs = o.extraArgs ?? ["--connect-timeout-ms", "5000", "--broken-exit-delay-ms", "200"];
  return [
    `desired = "${o.desired ?? "running"}"`,
    `suspend = ${o.suspend ?? false}`,
    `nodes = ${JSON.stringify(o.nodes)}`,
    "",
    "[model]",
    `id = ${JSON.stringify(o.modelId ?? world.modelDir)}`,
    `source = "${o.modelSource ?? "path"}"`,
    `context_length = ${o.contextLength ?? 256}`,
    "",
    "[engine]",
    'kind = "reference"',
    ...(o.binary === undefined ? [] : [`binary = ${JSON.stringify(o.binary)}`]),
    ...(o.version === undefined ? [] : [`version = ${JSON.stringify(o.version)}`]),
    `extra_args = ${JSON.stringify(extraArgs)}`,
    "",
    ...(o.portRange === undefined ? [] : ["[transport]", `port_range = "${o.portRange}"`, ""]),
    "[coordinator]",
    `node = "${o.coordinatorNode ?? "local"}"`,
    'host = "127.0.0.1"',
    `port = ${o.port ?? 8080}`,
    "",
    "[router]",
    `register = ${o.register ?? false}`,
    ...(o.backend === undefined ? [] : [`backend = ${JSON.stringify(o.backend)}`]),
    "",
  ].join("\n");
}

/**
 * A definition of two stages on n1 and n2 serving `modelDir` where it lies (context 256), for any
 * engine: the `[engine]`, `[coordinator]` and `[router]` tables are the lines given.
 */
export function twoStageDefinition(modelDir: string, tables: { engine: string[]; coordinator: string[]; router: string[]; portRange: string }): string {
  return [
    'nodes = ["n1", "n2"]',
    "",
    "[model]",
    `id = ${JSON.stringify(modelDir)}`,
    'source = "path"',
    "context_length = 256",
    "",
    "[engine]",
    ...tables.engine,
    "",
    "[transport]",
    `port_range = "${tables.portRange}"`,
    "",
    "[coordinator]",
    ...tables.coordinator,
    "",
    "[router]",
    ...tables.router,
    "",
  ].join("\n");
}

/**
 * Delete a cluster's definition and wait (up to `timeoutMs`) until the daemon has pruned it and
 * dropped its status file; whether it did in time.
 */
/**
 * Turns the daemon's metrics listener on in the world's settings (before the daemon starts), on a
 * leased loopback address whose port stays free until the daemon binds it; the `/metrics` URL.
 */
export async function enableMetrics(world: DaemonWorld): Promise<string> {
  const host = await allocateHost();
  const port = await freeLoopbackPort(host);
  const settings = await readFile(world.settingsFile, "utf8");
  await writeFile(world.settingsFile, settings.replace("[daemon]\n", `[daemon]\nmetrics_address = "${host}:${port}"\n`));
  return `http://${host}:${port}/metrics`;
}

export async function removeDefinition(world: DaemonWorld, name: string, timeoutMs = 20_000): Promise<boolean> {
  await rm(join(world.clustersDir, `${name}.toml`), { force: true });
  const deadline = Date.now() + timeoutMs;
  while ((await readStatusFile(world, name)) !== undefined) {
    if (Date.now() >= deadline) return false;
    await sleep(100);
  }
  return true;
}

/** Write a definition the way an editor or git does: temp file, then rename into place. */
export async function writeDefinition(world: DaemonWorld, name: string, text: string): Promise<string> {
  const file = join(world.clustersDir, `${name}.toml`);
  await writeFile(`${file}.swp`, text);
  await rename(`${file}.swp`, file);
  return file;
}

/** Commit everything under clusters/ (status files included, as CI would). */
export async function commitAll(world: DaemonWorld, message: string): Promise<string> {
  const git = (args: string[]) => run("git", ["-C", world.root, "-c", "user.name=t", "-c", "user.email=t@example.invalid", ...args]);
  await git(["add", "-A", "clusters"]);
  await git(["commit", "-q", "--allow-empty", "-m", message]);
  return (await git(["rev-parse", "HEAD"])).stdout.trim();
}

/**
 * Timings that keep a test in seconds. The monitor polls every 400 ms (the daemon's default is
 * 1 s): each poll of a cluster on SSH nodes runs a command on every node, and at 200 ms an idle
 * three-node cluster took about a quarter of a core (sshd, its shells, the daemon), which the suite's
 * other files then lacked. Deaths are seen by the exit watches, whatever the poll.
 */
export const fastLaunch = { stageListenMs: 15_000, coordinatorHealthMs: 15_000, readinessMs: 15_000, stopGraceMs: 2_000 };
export const fastMonitor = { pollIntervalMs: 400, strikes: 2 };
export type MonitorTimings = NonNullable<DaemonOptions["monitor"]>;
export type LaunchTimings = NonNullable<DaemonOptions["launchDeadlines"]>;

/**
 * The daemon in this process, logging to <root>/daemon.log; `monitor` replaces the fast health
 * monitor's timings, `launch` overrides some of fastLaunch's deadlines (a test that waits one out).
 */
export async function startInProcessDaemon(
  world: DaemonWorld,
  resyncMs = 60_000,
  monitor: MonitorTimings = fastMonitor,
  launch: LaunchTimings = {},
  /** The directory it watches (default the world's), its log file in the world's root (default daemon.log), whether it tears down on exit. */
  more: { dir?: string; logName?: string; teardownOnExit?: boolean; routerWatch?: DaemonOptions["routerWatch"] } = {},
): Promise<Daemon> {
  const log = pino({ level: "debug" }, pino.destination({ dest: join(world.root, more.logName ?? "daemon.log"), sync: true }));
  return startDaemon({
    dir: more.dir ?? world.clustersDir,
    settingsFile: world.settingsFile,
    log,
    resyncMs,
    debounceMs: 50,
    launchDeadlines: { ...fastLaunch, ...launch },
    monitor,
    ...(more.teardownOnExit === undefined ? {} : { teardownOnExit: more.teardownOnExit }),
    ...(more.routerWatch === undefined ? {} : { routerWatch: more.routerWatch }),
  });
}

export interface SpawnedDaemon {
  child: ChildProcess;
  /** Resolves with the exit code (null when killed by a signal). */
  exited: Promise<number | null>;
  stderr(): string;
}

/** `shardctl daemon` as a real process (its logs on stderr, kept in memory and in <root>/daemon-<pid>.log). */
export async function spawnDaemon(world: DaemonWorld, extraEnv: Record<string, string> = {}, options: { umask?: string } = {}): Promise<SpawnedDaemon> {
  const argv = [process.execPath, shardctlJs, "daemon", "--config", world.settingsFile, "--dir", world.clustersDir];
  // Started by a shell with that umask, as a service manager or a login shell might start it.
  const [program, ...args] = options.umask === undefined ? argv : ["/bin/sh", "-c", `umask ${options.umask} && exec "$@"`, "sh", ...argv];
  const child = spawn(program!, args, {
    cwd: world.root,
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, SHARDCTL_LOG_LEVEL: "debug", ...extraEnv },
  });
  let stderr = "";
  child.stderr!.on("data", (d: Buffer) => (stderr += d.toString()));
  child.stdout!.resume();
  const exited = new Promise<number | null>((done) => child.once("exit", (code) => done(code)));
  return { child, exited, stderr: () => stderr };
}

/** Wait for a daemon process to log that it watches (it holds the lock by then). */
export async function waitWatching(daemon: SpawnedDaemon, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!daemon.stderr().includes("daemon watching")) {
    if (daemon.child.exitCode !== null) throw new Error(`daemon exited ${daemon.child.exitCode}: ${daemon.stderr()}`);
    if (Date.now() > deadline) throw new Error(`daemon not watching after ${timeoutMs} ms: ${daemon.stderr()}`);
    await sleep(50);
  }
}

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Run `shardctl <args>` from the built CLI. */
export function runShardctl(world: DaemonWorld, args: string[], timeoutMs = 60_000): Promise<CliResult> {
  return new Promise((done) => {
    const child = spawn(process.execPath, [shardctlJs, ...args, "--config", world.settingsFile, "--dir", world.clustersDir], {
      cwd: world.root,
      stdio: ["ignore", "pipe", "pipe"],
      timeout: timeoutMs,
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    child.once("close", (code) => done({ code, stdout, stderr }));
  });
}

/** Read a cluster's status file (validated against the JSON Schema), or undefined. */
export async function readStatusFile(world: DaemonWorld, name: string): Promise<ClusterStatus | undefined> {
  let text: string;
  try {
    text = await readFile(join(world.clustersDir, `${name}.status.json`), "utf8");
  } catch {
    return undefined;
  }
  const status = JSON.parse(text) as ClusterStatus;
  assertValidStatus(status, `${name}.status.json`);
  return status;
}

/** Poll the status file until `predicate` holds; throws with the last status on timeout. */
export async function waitForStatus(world: DaemonWorld, name: string, predicate: (status: ClusterStatus) => boolean, timeoutMs = 45_000): Promise<ClusterStatus> {
  const deadline = Date.now() + timeoutMs;
  let last: ClusterStatus | undefined;
  for (;;) {
    last = await readStatusFile(world, name).catch(() => last);
    if (last !== undefined && predicate(last)) return last;
    if (Date.now() > deadline) {
      throw new Error(`status of ${name} did not reach the expected state in ${timeoutMs} ms; last: ${JSON.stringify(last, null, 1)?.slice(0, 4000)}`);
    }
    await sleep(100);
  }
}

/** Every version of `name`'s status file the world's audit sees over the next `ms` (each one the daemon renames into place). */
export async function statusesDuring(world: DaemonWorld, name: string, ms: number): Promise<ClusterStatus[]> {
  const from = world.audit.versions.length;
  await sleep(ms);
  return world.audit.statusesOf(name, from);
}

export function conditionOf(status: ClusterStatus, type: string): ClusterStatus["conditions"][number] | undefined {
  return status.conditions.find((c) => c.type === type);
}

/** Ready=True at exactly `revision`. */
export function isReadyAt(status: ClusterStatus, revision?: string): boolean {
  const ready = conditionOf(status, "Ready");
  return ready?.status === "True" && (revision === undefined || (status.observedRevision === revision && ready.observedRevision === revision));
}

// --- the JSON Schema -------------------------------------------------------------------------

let validator: (((value: unknown) => boolean) & { errors?: unknown }) | undefined;

export function assertValidStatus(value: unknown, what: string): void {
  if (validator === undefined) {
    const ajv = new Ajv2020({ allErrors: true, strict: true });
    // ajv's core knows no formats: check date-time as the RFC 3339 UTC form zod writes.
    ajv.addFormat("date-time", /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/);
    validator = ajv.compile(JSON.parse(readFileSync(statusSchemaFile, "utf8")) as object);
  }
  if (!validator(value)) throw new Error(`${what} does not validate against ${statusSchemaFile}: ${JSON.stringify(validator.errors)}`);
}

/**
 * Every version of every status file that appears in a directory, validated against the schema as
 * it is seen (fs.watch on the directory: the daemon renames each new version into place).
 */
export class StatusAudit {
  /** Versions seen (distinct texts), all files. */
  seen = 0;
  readonly problems: string[] = [];
  /** Every distinct version seen, in order (for diagnostics). */
  readonly versions: Array<{ name: string; text: string }> = [];
  private readonly texts = new Set<string>();
  private readonly watcher: FSWatcher;

  constructor(dir: string) {
    // Read at once, synchronously: the daemon may rename the next version into place a few ms
    // later, and an asynchronous read (four trips through libuv's thread pool on a loaded machine)
    // then finds that one instead, and the version in between is never seen.
    this.watcher = watch(dir, (_event, name) => {
      if (name === null || !name.endsWith(".status.json")) return;
      let text: string;
      try {
        text = readFileSync(join(dir, name), "utf8");
      } catch {
        return;
      }
      this.check(name, text);
    });
  }

  /** The versions of cluster `name`'s status file seen from the `from`-th version of all on (default: every one), parsed. */
  statusesOf(name: string, from = 0): ClusterStatus[] {
    return this.versions
      .slice(from)
      .filter((v) => v.name === `${name}.status.json`)
      .map((v) => JSON.parse(v.text) as ClusterStatus);
  }

  private check(name: string, text: string): void {
    if (this.texts.has(text)) return;
    this.texts.add(text);
    this.seen += 1;
    this.versions.push({ name, text });
    try {
      assertValidStatus(JSON.parse(text), name);
    } catch (error) {
      this.problems.push((error as Error).message);
    }
  }

  close(): void {
    this.watcher.close();
  }
}

// --- processes and ports ---------------------------------------------------------------------

/** Live (non-zombie) processes whose command line mentions `needle` (default: the world's root or its sshd root). */
export async function processesOf(world: DaemonWorld, needles: string[] = [world.root, ...(world.sshd ? [world.sshd.root] : [])]): Promise<string[]> {
  const { stdout } = await run("ps", ["-eo", "pid=,stat=,args="], { maxBuffer: 16 << 20 });
  return stdout
    .split("\n")
    .filter((line) => {
      const [, stat] = line.trim().split(/\s+/);
      const args = line.trim().split(/\s+/).slice(2).join(" ");
      return (
        !stat?.startsWith("Z") &&
        needles.some((n) => line.includes(n)) &&
        !args.includes(" daemon --config ") &&
        !args.startsWith("/usr/sbin/sshd") &&
        !args.startsWith("sshd")
      );
    })
    .map((l) => l.trim());
}

/** Engine processes (shard-engine) of the world. */
export async function enginesOf(world: DaemonWorld): Promise<string[]> {
  return (await processesOf(world)).filter((l) => l.includes("shard-engine") || l.includes("slow-engine.sh"));
}

/** Kill (SIGKILL) every engine process of the world still running; returns their ps lines (empty: none was left). */
export async function killEnginesOf(world: DaemonWorld): Promise<string[]> {
  const left = await enginesOf(world);
  for (const line of left) {
    try {
      process.kill(Number(line.trim().split(/\s+/)[0]), "SIGKILL");
    } catch {
      // Already gone.
    }
  }
  return left;
}

/** The shard-engine pid of a recorded (wrapper) pid: the wrapper's child, or the pid itself. */
export async function enginePidOf(wrapperPid: number): Promise<number> {
  const { stdout } = await run("ps", ["-o", "pid=,args=", "--ppid", String(wrapperPid)]).catch(() => ({ stdout: "" }));
  const child = stdout.split("\n").find((l) => l.includes("shard-engine"));
  const pid = Number(child?.trim().split(/\s+/)[0]);
  return Number.isInteger(pid) && pid > 0 ? pid : wrapperPid;
}

/** kill -9 the engine of stage `index` of `status` (the wrapper's child: what a crash kills); returns its pid. */
export async function killStage(status: ClusterStatus, index: number): Promise<number> {
  const pid = await enginePidOf(status.stages[index]!.pid!);
  process.kill(pid, "SIGKILL");
  return pid;
}

export { freePort } from "../support/free-ports.js";

/** "a-b": `width` consecutive ports free on every host, from a random region (others test at once). */
export async function freePortRange(hosts: readonly string[], width = 8): Promise<string> {
  const first = await freePortRun(hosts, width);
  return `${first}-${first + width - 1}`;
}

/** One chat completion through an OpenAI-compatible base URL; the reply text. */
export async function chat(baseUrl: string, model: string): Promise<string> {
  const response = await fetch(`${baseUrl}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model, messages: [{ role: "user", content: "hello" }], max_tokens: 4 }),
    signal: AbortSignal.timeout(15_000),
  });
  const body = (await response.json()) as { choices?: Array<{ message?: { content?: string } }>; error?: unknown };
  if (!response.ok) throw new Error(`chat completion failed: ${response.status} ${JSON.stringify(body)}`);
  return body.choices?.[0]?.message?.content ?? "";
}

/**
 * An engine binary at `<root>/bin/<name>`: a shell script that runs `prelude` (shell lines, `$@` the
 * engine's arguments), then becomes the bundled reference engine. Its path.
 */
export async function writeWrappedEngine(world: DaemonWorld, name: string, prelude: string): Promise<string> {
  const path = join(world.root, "bin", name);
  await mkdir(join(world.root, "bin"), { recursive: true });
  await writeFile(path, `#!/bin/sh\n${prelude}\nexec ${bundledShardEngineCommand.map((arg) => JSON.stringify(arg)).join(" ")} "$@"\n`, { mode: 0o755 });
  return path;
}

/** An engine binary that waits `delaySeconds` before it becomes the real shard-engine (slow start-up). */
export function writeSlowEngine(world: DaemonWorld, delaySeconds: number): Promise<string> {
  return writeWrappedEngine(world, "slow-engine.sh", `sleep ${delaySeconds}`);
}

/**
 * An engine that answers nothing, `--version` included, while the returned flag file exists (it
 * does from the start), then runs as the bundled reference engine: remove the flag to let it go.
 */
export async function writeHangingEngine(world: DaemonWorld): Promise<{ binary: string; flag: string }> {
  const flag = join(world.root, "hang-engine");
  await writeFile(flag, "");
  const binary = await writeWrappedEngine(world, "hanging-engine.sh", `while [ -e ${JSON.stringify(flag)} ]; do sleep 0.1; done`);
  return { binary, flag };
}

/**
 * A stand-in engine at `<root>/bin/<name>`: the bundled reference engine, except that stage-0 first
 * runs the shell command `stage0` (`kill -STOP $$` to stop itself, `exec sleep 3600` to hang) while
 * the file `flag` exists.
 */
export function writeFlaggedEngine(world: DaemonWorld, name: string, flag: string, stage0: string): Promise<string> {
  return writeWrappedEngine(world, name, `case " $* " in *" --node-id stage-0 "*) [ -e ${JSON.stringify(flag)} ] && ${stage0} ;; esac`);
}

/** Append a line to a file (an "edit" that keeps the content valid). */
export async function appendLine(file: string, line: string): Promise<void> {
  const handle = await open(file, "a");
  await handle.write(`${line}\n`);
  await handle.close();
}

function findRepoRoot(from: string): string {
  for (let dir = from; dir !== dirname(dir); dir = dirname(dir)) {
    if (existsSync(join(dir, "package.json")) && existsSync(join(dir, "schemas"))) return dir;
  }
  throw new Error(`no repository root above ${from}`);
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** The revision the daemon computes for a definition as it is on disk now. */
export async function revisionOf(world: DaemonWorld, name: string): Promise<string> {
  const settings = await loadSettings(world.settingsFile);
  const loaded = await loadCluster(join(world.clustersDir, `${name}.toml`), settings);
  if (!loaded.ok) throw new Error(`${name}.toml is invalid: ${loaded.issues.map(formatIssue).join("; ")}`);
  return computeRevision(loaded.value, settings);
}

/**
 * Commit a definition, then check it out into clusters/ (what a `git pull` or `git checkout` does):
 * the file appears already committed, so the daemon's first look finds its commit.
 */
export async function commitDefinition(world: DaemonWorld, name: string, text: string): Promise<string> {
  const git = (args: string[], input?: string) =>
    new Promise<string>((done, fail) => {
      const child = execFile("git", ["-C", world.root, "-c", "user.name=t", "-c", "user.email=t@example.invalid", ...args], (error, stdout) =>
        error === null ? done(stdout.trim()) : fail(error),
      );
      if (input !== undefined) child.stdin!.end(input);
    });
  const blob = await git(["hash-object", "-w", "--stdin"], text);
  await git(["update-index", "--add", "--cacheinfo", `100644,${blob},clusters/${name}.toml`]);
  await git(["commit", "-q", "-m", `add ${name}`]);
  await git(["checkout", "--", `clusters/${name}.toml`]);
  return git(["rev-parse", "HEAD"]);
}
