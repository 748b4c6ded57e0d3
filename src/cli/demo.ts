#!/usr/bin/env node
/**
 * The embedded demo (`npm start`): make the demo model if missing, run the daemon on this
 * repository's clusters/ with shardctl.toml (two local nodes, the reference engine, the embedded
 * router), print the dashboard's URL as soon as it serves, "ready" and how to talk to it once the
 * demo cluster is Ready, and tear it all down on Ctrl-C. Everything it writes stays under .demo/ in
 * the working directory. It prints only lines for people, and when it cannot succeed (a port it
 * needs is taken) it says which setting to change and exits 1 at once rather than waiting for a
 * Ctrl-C.
 */
import { mkdir, readdir, rename, stat, writeFile } from "node:fs/promises";
import { parseArgs } from "node:util";
import { isShardctlError, messageOf } from "../errors/index.js";
import { pathExists } from "../files/index.js";
import { dirname, isAbsolute, join, relative, resolve } from "node:path";
import { makeTestModel } from "../planner/index.js";
import { daemonWatching, readStatus, requestsDirOf, startDaemon, statusFileFor, type ClusterStatus } from "../reconciler/index.js";
import { Ledger } from "../launch/index.js";
import { readRouterConfig } from "../router/index.js";
import { computeRevision, loadCluster, loadSettings, type ClusterSpec, type Settings } from "../spec/index.js";
import { waitForSignal } from "./wait-for-signal.js";
import { addressHolder } from "./demo-ports.js";
import { createLogger, logFormatOption, parseLogFormat } from "./logger.js";
import { joinHostPort } from "../nodes/index.js";

const settingsFile = resolve("shardctl.toml");
const clusterName = "demo";
const readyTimeoutMs = 5 * 60_000;

const usage = `usage: npm start [-- --log-format json|pretty]
  Runs the demo cluster (clusters/demo.toml, shardctl.toml) until Ctrl-C. The daemon's log goes to
  .demo/daemon.log as JSON lines; its warnings and errors also reach the terminal, as human lines
  unless --log-format json.`;

/** A reason the demo cannot go on, said to the person running it: printed without a stack, exit 1. */
class DemoFailure extends Error {}

async function main(args: string[]): Promise<number> {
  const { values } = parseArgs({ args, options: { ...logFormatOption, help: { type: "boolean", short: "h" } } });
  if (values.help) {
    console.log(usage);
    return 0;
  }
  const format = parseLogFormat(values["log-format"]) ?? "pretty";
  const settings = await loadSettings(settingsFile);
  const clustersDir = join(dirname(settingsFile), "clusters");
  const definition = join(clustersDir, `${clusterName}.toml`);
  const loaded = await loadCluster(definition, settings);
  if (!loaded.ok) throw new Error(`${definition} is invalid: ${loaded.issues.map((i) => i.message).join("; ")}`);
  const spec = loaded.value;

  // Another demo (or a daemon) on this directory: say so, rather than that its ports are taken.
  const running = await daemonWatching(clustersDir);
  if (running !== undefined) {
    throw new DemoFailure(`another demo or daemon (pid ${running}) already watches ${shown(clustersDir)}: stop it first (Ctrl-C in its terminal, or kill ${running})`);
  }

  // The embedded router's config: where it listens, and the backends list clusters join.
  const routerConfig = settings.router.config!;
  if (!(await pathExists(routerConfig))) {
    await mkdir(dirname(routerConfig), { recursive: true });
    await writeFile(
      routerConfig,
      '# The embedded router of the shardctl demo; shardctl adds and removes backends.\nserver:\n  bind_address: "127.0.0.1:8088"\nbackends: []\n',
    );
  }

  // Every address the demo listens on, checked before anything starts, and every taken one named
  // at once: freeing one port at a time, a run each, is no way to meet the next. (What binds each
  // still refuses it if it is taken between this check and then.)
  const uiAddress = settings.daemon.uiAddress;
  const taken = await takenAddresses(spec, settings, routerConfig);
  if (taken.length > 0) {
    // Said before the reason (which goes to stderr), so it reads as an introduction, not an ending.
    console.log("the demo cannot start: an address it needs is taken (below); nothing of it was started");
    throw new DemoFailure(taken.join("\n"));
  }

  // A model on this machine: the demo's own is made once (random weights; a Hub model is staged by
  // the daemon like any other).
  // ("path": the model is used where it lies on each node; nothing is made or checked here.)
  if (spec.model.path !== undefined && spec.model.source === "push") await ensureModel(spec.model.path, definition, settingsFile);

  // A fresh start for the demo cluster: whatever an earlier run left in its status (a spent restart
  // budget, a Ready of processes long gone) is looked at again, as `shardctl reconcile demo` would.
  await mkdir(requestsDirOf(settings.daemon.stateDir), { recursive: true });
  await writeFile(join(requestsDirOf(settings.daemon.stateDir), clusterName), new Date().toISOString());

  // The daemon's log goes to a file, not between the demo's lines: the terminal is for a person
  // following the demo, who needs its warnings and errors only, and as human lines (pretty even
  // through a pipe); the file keeps everything, as JSON lines, for when something goes wrong.
  const logFile = join(dirname(settingsFile), ".demo", "daemon.log");
  // The last run's log is kept beside it (daemon.log.1): a run that went wrong is often looked
  // into after starting the demo again.
  await rename(logFile, `${logFile}.1`).catch(() => undefined);
  const log = createLogger("shardctl-demo", { format, file: logFile, stderrLevel: "warn" });
  const startedAt = Date.now();
  // Listened for before anything is said: a Ctrl-C that arrives as soon as the first line shows
  // (or while the daemon starts) must tear down, not kill the demo with its cluster left behind.
  // Closing the terminal (SIGHUP) tears the demo down too: otherwise its cluster ran on with
  // nobody watching it, and the next `npm start` found its ports taken.
  const stop = waitForSignal(["SIGINT", "SIGTERM", "SIGHUP"]);
  // A terminal that is gone fails every later write (EIO): the teardown goes on regardless.
  for (const stream of [process.stdout, process.stderr]) stream.on("error", () => undefined);
  const daemon = await startDaemon({ dir: clustersDir, settingsFile, log, teardownOnExit: true }).catch((error: unknown) => {
    // Taken between the check above and the daemon's listen, or an address this machine lacks.
    if (isShardctlError(error, "DashboardListenFailed")) throw new DemoFailure(`${error.message}\n  ${moveDashboard(uiAddress ?? "")}`);
    if (!isShardctlError(error, "RouterListenFailed")) throw error;
    // Nothing serves yet: say which file holds the router's address; the demo writes that file only when it is missing.
    throw new DemoFailure(`${error.message}\n  ${moveRouter(routerConfig)}`);
  });
  console.log(`daemon watching ${shown(clustersDir)}; launching cluster "${clusterName}" (2 stages on this machine) …`);
  console.log(`daemon log: ${shown(logFile)} (warnings and errors are shown here too)`);
  // Now, not once Ready: a slow or failing launch is when the page helps most.
  if (daemon.uiUrl !== undefined) console.log(`dashboard: ${daemon.uiUrl} (open it in a browser to follow the launch)`);

  const revision = computeRevision(spec, settings);
  // Ctrl-C ends the wait for Ready too: its health lines would otherwise go on below the teardown's.
  const interrupted = new AbortController();
  void stop.then(() => interrupted.abort());
  const outcome = await Promise.race([waitReady(statusFileFor(definition), revision, spec, startedAt, interrupted.signal), stop.then(() => "interrupted" as const)]);
  if (outcome === "ready") {
    const url = daemon.routerUrl ?? "http://127.0.0.1:8088";
    console.log(`\ncluster "${clusterName}" is ready — serving ${spec.model.id} through the embedded router at ${url}\n`);
    // Said before anyone tries it: the reply to the curl below is nonsense by construction.
    if (isDemoModel(spec, settingsFile)) {
      console.log("the demo model has random weights: its replies are meaningless bytes, not language.");
      console.log(`to serve a real model, edit [model] in ${shown(definition)}: id = "<org>/<name>" (a Hugging Face Hub id) with`);
      console.log('  source = "hub", or id = "<directory>" (a local MLX model directory) with source = "push".\n');
    }
    console.log("talk to it:");
    console.log(`  curl -s ${url}/v1/chat/completions -H 'content-type: application/json' \\`);
    console.log(`    -d '{"model": "${spec.model.id}", "messages": [{"role": "user", "content": "Hello"}], "max_tokens": 16}'`);
    console.log("watch it:");
    console.log("  npx shardctl status --watch demo");
    if (daemon.uiUrl !== undefined) console.log(`  ${daemon.uiUrl}  (the dashboard: open it in a browser)`);
    console.log("\nCtrl-C tears the demo down.");
  }
  // Waiting on a demo that cannot become ready helps no one: tear down and exit 1 at once.
  if (outcome === "ready") await stop;
  console.log("tearing the demo down …");
  await daemon.stop();
  console.log("demo stopped: no process of it is left");
  if (outcome !== "ready" && outcome !== "interrupted") throw new DemoFailure(outcome.failure);
  return 0;
}

/** Whether `file` was last written at or after `since` (ms since the epoch). */
async function writtenSince(file: string, since: number): Promise<boolean> {
  const info = await stat(file).catch(() => undefined);
  return info !== undefined && info.mtimeMs >= since;
}

/** "ready", or why it will not be. */
async function waitReady(statusFile: string, revision: string, spec: ClusterSpec, startedAt: number, interrupted: AbortSignal): Promise<"ready" | { failure: string }> {
  const deadline = Date.now() + readyTimeoutMs;
  let lastHealth = "";
  while (Date.now() < deadline) {
    const status = await readStatus(statusFile).catch(() => undefined);
    // Nobody waits for the answer any more (the caller tears down): say nothing.
    if (interrupted.aborted) return { failure: "interrupted" };
    if (status !== undefined && status.observedRevision === revision) {
      // Said once this daemon's passes speak: not an earlier run's last word (its Stopped), nor
      // that word kept as the daemon takes the demo's reconcile request (`RetryRequested`).
      const passSpoke = status.conditions.find((c) => c.type === "Reconciling")?.reason !== "RetryRequested" && (await writtenSince(statusFile, startedAt));
      if (passSpoke && status.health !== lastHealth) {
        lastHealth = status.health;
        console.log(`  ${status.health}${status.lastError ? ` (${status.lastError.reason}: ${status.lastError.message})` : ""}`);
      }
      // Ready, and converged by this daemon (an earlier run's Ready does not count).
      const ready = status.conditions.find((c) => c.type === "Ready");
      const reconciling = status.conditions.find((c) => c.type === "Reconciling");
      if (ready?.status === "True" && ready.observedRevision === revision && reconciling?.status === "False") return "ready";
      const portTaken = portTakenFailure(status, spec, startedAt);
      if (portTaken !== undefined) return { failure: portTaken };
      const stalled = status.conditions.find((c) => c.type === "Stalled");
      if (stalled?.status === "True" && since(stalled.lastTransitionTime, startedAt)) {
        return { failure: `the demo cluster is Stalled: ${stalled.reason}: ${stalled.message}` };
      }
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  return {
    failure: `the demo cluster was not ready within ${readyTimeoutMs / 1000} s; see ${shown(statusFile)} and ${shown(join(dirname(settingsFile), ".demo", "daemon.log"))}`,
  };
}

/**
 * A port the demo needs is taken, and which setting moves it. The daemon would retry the launch
 * (the port may be freed), but a person running the demo wants to hear it now, not after the
 * restart budget is spent.
 */
function portTakenFailure(status: ClusterStatus, spec: ClusterSpec, startedAt: number): string | undefined {
  const error = status.lastError;
  // Only this run's errors: the status file may still hold an earlier run's.
  if (error === undefined || !since(error.at, startedAt)) return undefined;
  if (error.reason === "PortInUse") return coordinatorPortTaken(spec);
  if (error.reason === "PortRangeExhausted") {
    return `${error.message}\n  widen or move the range in ${shown(settingsFile)}: [distributed] port_range, or stop what holds those ports`;
  }
  return undefined;
}

/**
 * The addresses the demo will listen on that another program holds now, each said with the setting
 * that moves it: the dashboard's, the embedded router's (from its config; one that cannot be read
 * is left for the daemon to report) and the coordinator's when it runs on this machine.
 */
async function takenAddresses(spec: ClusterSpec, settings: Settings, routerConfig: string): Promise<string[]> {
  // `taken`: what to say, given who holds the address (" by pid N (command)", or "").
  const wanted: Array<{ address: string; taken: (by: string) => string }> = [];
  const ui = settings.daemon.uiAddress;
  if (ui !== undefined) wanted.push({ address: ui, taken: (by) => `the dashboard's address ${ui} is already in use${by}.\n  ${moveDashboard(ui)}` });
  // A config that cannot be read is left for the daemon to report, in its own words.
  const config = settings.router.embedded ? await readRouterConfig(routerConfig).catch(() => undefined) : undefined;
  if (config !== undefined) {
    // Without server.bind_address the router listens on 127.0.0.1:8080.
    const bind = config.bind;
    const address = bind === undefined ? "127.0.0.1:8080" : joinHostPort(bind.host, bind.port);
    wanted.push({ address, taken: (by) => `the router's address ${address} is already in use${by}.\n  ${moveRouter(routerConfig)}` });
  }
  const { node, host, port } = spec.coordinator;
  // The demo's own cluster, left running by an earlier run that could not tear it down (killed with
  // SIGKILL), holds its port: the daemon takes it over or tears it down, so that is no port to move.
  const leftover = (await new Ledger(settings.daemon.stateDir).read(clusterName).catch(() => undefined))?.ports.some((p) => p.port === port);
  if (leftover !== true && (node === "local" || settings.nodes[node]?.host === "local")) {
    wanted.push({ address: joinHostPort(host, port), taken: (by) => coordinatorPortTaken(spec, by) });
  }
  const taken: string[] = [];
  for (const { address, taken: said } of wanted) {
    const by = await addressHolder(address);
    if (by !== undefined) taken.push(said(by));
  }
  return taken;
}

/** The coordinator's port is taken (`by`: who holds it, as addressHolder says it), and the setting that moves it. */
function coordinatorPortTaken(spec: ClusterSpec, by = ""): string {
  const { host, port } = spec.coordinator;
  const definition = join(dirname(settingsFile), "clusters", `${clusterName}.toml`);
  return `the coordinator's port ${joinHostPort(host, port)} is already in use${by}.\n  set a free port in ${shown(definition)}: [coordinator] port = ${port}, or stop what holds it`;
}

/** The setting that moves the embedded router, and where it is. */
function moveRouter(routerConfig: string): string {
  return `${shown(routerConfig)} is the router config that [router] config in ${shown(settingsFile)} names: edit its server.bind_address (the demo never overwrites it)`;
}

/** The setting that moves the dashboard, and where it is. */
function moveDashboard(address: string): string {
  return `set a free address in ${shown(settingsFile)}: [daemon] ui_address = "${address}", or stop what holds it`;
}

/** Whether an RFC 3339 time is at or after `startedAt` (to the second: statuses may drop the milliseconds). */
function since(time: string, startedAt: number): boolean {
  return Date.parse(time) >= Math.floor(startedAt / 1000) * 1000;
}

/** A path as the person typed it from here: relative to the working directory when under it. */
function shown(file: string): string {
  const path = relative(process.cwd(), file);
  return path === "" || path.startsWith("..") ? file : path;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error: unknown) => {
    console.error(`shardctl demo: ${messageOf(error)}`);
    process.exit(1);
  },
);

/**
 * The directory `[model] id` names holds a model (config.json), or the demo makes its own model
 * there — only under .demo/ (a path elsewhere is somebody's model, perhaps mistyped: it gets no
 * random weights) and only where nothing is yet (a directory with other files is never written to).
 */
async function ensureModel(modelDir: string, definition: string, settings: string): Promise<void> {
  if (await pathExists(join(modelDir, "config.json"))) return;
  if (!isUnderDemo(modelDir, settings)) {
    throw new DemoFailure(
      `[model] id in ${shown(definition)} names ${shown(modelDir)}, which holds no model (no config.json there).\n` +
        `  Point id at the directory with config.json and the *.safetensors files; the demo makes its random-weights model only under .demo/.`,
    );
  }
  const entries = await readdir(modelDir).catch((error: NodeJS.ErrnoException) => {
    if (error.code === "ENOENT") return [];
    throw new DemoFailure(`[model] id in ${shown(definition)} names ${shown(modelDir)}, which cannot be read: ${error.message}`);
  });
  if (entries.length > 0) {
    throw new DemoFailure(
      `[model] id in ${shown(definition)} names ${shown(modelDir)}, which holds files but no config.json: it is not an MLX model directory.\n` +
        `  Point id at the directory with config.json and the *.safetensors files (the demo makes its random-weights model only in an empty or missing directory).`,
    );
  }
  console.log(`making the demo model in ${shown(modelDir)} …`);
  await makeTestModel(modelDir, { layers: 8, hidden: 128, heads: 4, kvHeads: 2, vocab: 512, seed: 42 });
}

/** The model is the demo's own (made under .demo/, random weights), not one the person chose. */
function isDemoModel(spec: ClusterSpec, settings: string): boolean {
  return spec.model.path !== undefined && isUnderDemo(spec.model.path, settings);
}

/** `path` lies in the demo's own directory, .demo/ beside shardctl.toml. */
function isUnderDemo(path: string, settings: string): boolean {
  const inside = relative(join(dirname(settings), ".demo"), path);
  return !inside.startsWith("..") && !isAbsolute(inside);
}
