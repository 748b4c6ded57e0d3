/**
 * The world of the lifecycle tests and bench/lifecycle.ts: real sshd nodes on loopback addresses
 * leased for this world alone (test/support/sshd.ts, test/support/test-world.ts), a small test model on the shared file system, a ledger, a continuum
 * router YAML with its registrar and the embedded router serving it, and launch requests for a
 * 2-stage reference cluster (stage-0 and the coordinator on node-1, stage-1 on node-2). Stand-in
 * engine binaries (shell scripts given as `[engine] binary`) inject launch failures. No vitest
 * imports: the bench uses it too. Run `npm run build` first (the engine runs from dist/).
 */
import { existsSync } from "node:fs";
import { chmod, mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import {
  bundledShardEngine,
  bundledShardEngineCommand,
  createDriver,
  defaultDeadlines,
  Ledger,
  LaunchError,
  launchCluster,
  teardownCluster,
  type LaunchContext,
  type LaunchDeadlines,
  type LaunchRequest,
  type LedgerEntry,
  type TimelineEvent,
} from "../../src/launch/index.js";
import { launchMark, NodePool, type NodeAccess } from "../../src/nodes/index.js";
import { makeTestModel } from "../../src/planner/test-model/index.js";
import { createRegistrar, startRouter, type Registrar, type RunningRouter } from "../../src/router/index.js";
import { sshNodeConfig, startSshdNodes, type SshdSet } from "../support/sshd.js";

export interface LifecycleWorld {
  root: string;
  sshd: SshdSet;
  pool: NodePool;
  /** node-1, node-2 by name. */
  nodes: Map<string, NodeAccess>;
  hosts: Map<string, string>;
  modelDir: string;
  modelName: string;
  ledger: Ledger;
  routerConfig: string;
  registrar: Registrar;
  router: RunningRouter;
  /** Stand-in engine binaries by purpose. */
  standIns: Record<StandIn, string>;
  nodeFor(name: string): NodeAccess;
  close(): Promise<void>;
}

export type StandIn =
  | "exit3"
  | "exit255"
  | "daemonizes"
  | "listenRefusedPython"
  | "coordinatorPortTaken"
  | "listenRefusedFalsely"
  | "stagePortTakenWhileServerLoads"
  | "stageDiesWhileServerLoads"
  | "stageDiesWhileStageLoads"
  | "stageListensElsewhere"
  | "stageFloodsWhileLoading"
  | "coordinatorListensElsewhere"
  | "sleep"
  | "coordinatorExits"
  | "coordinatorNeverHealthy"
  | "coordinatorNotFound"
  | "coordinatorFailsCompletions"
  | "coordinatorNeverCompletes"
  | "coordinatorWarming"
  | "coordinatorCold"
  | "coordinatorAnswersHtml"
  | "coordinatorEndlessBody"
  | "coordinatorBodyStalls"
  | "coordinatorBindsEverywhere"
  | "listenRefused";

export interface WorldOptions {
  /**
   * @deprecated Ignored: the sshd nodes' addresses are leased with allocateHosts (test/support/test-world.ts)
   * so parallel test files never share one; accepted so older callers (bench/lifecycle.ts) still compile.
   */
  firstHost?: number;
  /** Number of nodes. Default 2. */
  count?: number;
}

export async function startLifecycleWorld(options: WorldOptions = {}): Promise<LifecycleWorld> {
  if (!existsSync(bundledShardEngine)) throw new Error(`${bundledShardEngine} is missing: run \`npm run build\` first`);
  const root = await mkdtemp(join(tmpdir(), "shardctl-lifecycle-"));
  const sshd = await startSshdNodes({ count: options.count ?? 2 });
  const pool = new NodePool({ knownHostsPath: sshd.knownHostsPath, sshConfigPath: join(root, "no-ssh-config") });
  const nodes = new Map<string, NodeAccess>();
  const hosts = new Map<string, string>();
  for (const [i, n] of sshd.nodes.entries()) {
    nodes.set(n.name, pool.get(sshNodeConfig(sshd, i)));
    hosts.set(n.name, n.host);
  }
  const modelName = "tiny-llama";
  const modelDir = join(root, modelName);
  await makeTestModel(modelDir, { layers: 4, hidden: 64, heads: 4, kvHeads: 2, vocab: 320, seed: 7 });

  const routerConfig = join(root, "router.yaml");
  await writeFile(routerConfig, `# lifecycle test router\nserver:\n  bind_address: "${hosts.get("node-1")}:0"\nbackends: []\n`);
  const router = await startRouter({ configFile: routerConfig, logger: pino({ level: "silent" }), reloadDebounceMs: 10 });
  const standIns = await writeStandIns(join(root, "bin"));
  return {
    root,
    sshd,
    pool,
    nodes,
    hosts,
    modelDir,
    modelName,
    ledger: new Ledger(join(root, "state")),
    routerConfig,
    registrar: createRegistrar({ kind: "continuum", config: routerConfig }),
    router,
    standIns,
    nodeFor(name) {
      const node = nodes.get(name);
      if (node === undefined) throw new Error(`no node ${name}`);
      return node;
    },
    async close() {
      await router.close();
      await pool.close();
      await sshd.close();
      // The port holders the stand-ins started outside the launches (which rightly left them).
      for (const pid of (await readFile(join(root, "bin", "port-holders.pids"), "utf8").catch(() => "")).split("\n").filter(Boolean)) {
        try {
          process.kill(Number(pid), "SIGKILL");
        } catch {
          // Gone already.
        }
      }
      await rm(root, { recursive: true, force: true });
    },
  };
}

export interface RequestOptions {
  cluster: string;
  /** `[engine] binary`; default the bundled shard-engine. */
  binary?: string;
  deadlines?: Partial<LaunchDeadlines>;
  /** Coordinator HTTP port; default a free one on node-1. */
  httpPort?: number;
  /** Register under this backend name; default the cluster name. */
  register?: boolean;
}

/** A 2-stage reference-engine launch: stage-0 + coordinator on node-1, stage-1 on node-2. */
export async function makeRequest(world: LifecycleWorld, options: RequestOptions): Promise<LaunchRequest> {
  const host1 = world.hosts.get("node-1")!;
  const host2 = world.hosts.get("node-2")!;
  const runRoot = join(world.root, "run", options.cluster, String(Date.now()));
  const runDir = async (name: string): Promise<string> => {
    const dir = join(runRoot, name);
    await mkdir(dir, { recursive: true });
    return dir;
  };
  const first = await freePortRange([host1, host2], 8);
  return {
    cluster: options.cluster,
    revision: "0123456789abcdef0123456789abcdef",
    driver: createDriver("reference", {
      ...(options.binary === undefined ? {} : { binary: options.binary }),
      extraArgs: ["--connect-timeout-ms", "5000", "--broken-exit-delay-ms", "200"],
    }),
    transport: "tcp",
    portRange: { first, last: first + 7 },
    stages: [
      { index: 0, nodeName: "node-1", node: world.nodeFor("node-1"), bindHost: host1, layers: [0, 2], modelDir: world.modelDir, runDir: await runDir("stage-0") },
      { index: 1, nodeName: "node-2", node: world.nodeFor("node-2"), bindHost: host2, layers: [2, 4], modelDir: world.modelDir, runDir: await runDir("stage-1") },
    ],
    coordinator: {
      nodeName: "node-1",
      node: world.nodeFor("node-1"),
      bindHost: host1,
      controlHost: host1,
      httpPort: options.httpPort ?? (await freePort(host1)),
      modelDir: world.modelDir,
      runDir: await runDir("coordinator"),
    },
    explicitLayers: true,
    modelName: world.modelName,
    maxSequences: 4,
    ...(options.register === false ? {} : { router: { backend: options.cluster } }),
    deadlines: { ...defaultDeadlines, stageListenMs: 15_000, coordinatorHealthMs: 15_000, readinessMs: 15_000, stopGraceMs: 2_000, ...options.deadlines },
  };
}

/** A launch context over the world's ledger and registrar, recording the timeline. */
export function makeContext(world: LifecycleWorld, registrar: Registrar = world.registrar): LaunchContext & { events: TimelineEvent[] } {
  const events: TimelineEvent[] = [];
  return {
    ledger: world.ledger,
    registrar,
    events,
    heldPorts: async () =>
      (await world.ledger.list()).flatMap((entry: LedgerEntry) =>
        entry.ports.map((p) => ({ host: p.host, port: p.port, holder: `cluster ${entry.cluster} (${p.purpose})` })),
      ),
    onEvent: (event) => events.push(event),
  };
}

/** Launch `request`, which must fail: its LaunchError (anything else fails the test). */
export async function launchFailure(world: LifecycleWorld, request: LaunchRequest, context: LaunchContext = makeContext(world)): Promise<LaunchError> {
  const error = await launchCluster(request, context).then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!(error instanceof LaunchError)) throw new Error(`the launch of ${request.cluster} was expected to fail with a LaunchError; it gave ${String(error)}`);
  return error;
}

/** Tear down what a launch of `cluster` left in the world's ledger, if anything (a test's clean-up). */
export async function tearDownLeft(world: LifecycleWorld, cluster: string): Promise<void> {
  const entry = await world.ledger.read(cluster);
  if (entry !== undefined) await teardownCluster(entry, { ledger: world.ledger, registrar: world.registrar, nodeFor: world.nodeFor, graceMs: 2_000 });
}

/** Processes on every node whose command line mentions `needle` (the world's root: every launch's run dir). */
export async function processesMentioning(world: LifecycleWorld, needle: string = world.root): Promise<string[]> {
  const lines: string[] = [];
  for (const [name, node] of world.nodes) {
    const result = await node.run(["ps", "-eo", "pid=,stat=,args="]);
    for (const line of result.stdout.split("\n")) {
      const [, stat] = line.trim().split(/\s+/);
      // Zombies are gone already (their parent has not reaped them yet).
      if (line.includes(needle) && !stat?.startsWith("Z")) lines.push(`${name}: ${line.trim()}`);
    }
  }
  return lines;
}

/** The engine process (the wrapper's child) of a recorded process: what a crash kills. */
export async function enginePidOf(node: NodeAccess, wrapperPid: number): Promise<number> {
  const result = await node.run(["ps", "-o", "pid=", "--ppid", String(wrapperPid)]);
  const pid = Number(result.stdout.trim().split(/\s+/)[0]);
  if (!Number.isInteger(pid) || pid <= 0) throw new Error(`no child of pid ${wrapperPid}: ${result.stdout}${result.stderr}`);
  return pid;
}

import { freePort, freePortRun as freePortRange } from "../support/free-ports.js";
export { freePort, freePortRange };

/** Stand-in engine binaries: each is `[engine] binary` for one injected failure. */
async function writeStandIns(dir: string): Promise<Record<StandIn, string>> {
  await mkdir(dir, { recursive: true });
  const node = JSON.stringify(process.execPath);
  const engine = bundledShardEngineCommand.map((arg) => JSON.stringify(arg)).join(" ");
  const server = join(dir, "coordinator-stand-in.mjs");
  await writeFile(server, coordinatorStandIn);
  // Real stages, and a coordinator that does `$1` instead of the real thing.
  // A coordinator loading for ever, and a stage-1 that listens, then dies 3 s later saying `words`.
  const stageDiesWhileServerLoads = (words: string): string =>
    `#!/bin/sh\ncase " $* " in\n  *" --node-id coordinator "*) exec ${node} ${JSON.stringify(server)} loading "$@" ;;\n  *" --node-id stage-1 "*) ${engine} "$@" & pid=$!; sleep 3; kill $pid; wait $pid; echo ${JSON.stringify(words)} >&2; exit 1 ;;\nesac\nexec ${engine} "$@"\n`;
  // The stage's transport address (its --host and --port) taken by an outgoing connection from it,
  // as Linux gives ports of the ephemeral range to connections: held by a process outside the
  // launch (no mark, a session of its own; its pid appended to port-holders.pids), so the
  // launch's probe is refused, not answered; then the stage says `words` and exits 1.
  const holder = `const net = require("node:net"); const [host, port] = process.argv.slice(1); const server = net.createServer(() => {}).listen(0, "127.0.0.1", () => net.connect({ host: "127.0.0.1", port: server.address().port, localAddress: host, localPort: Number(port) }));`;
  const portTakenThen = (words: string): string =>
    `#!/bin/sh\nfor a in "$@"; do case $prev in --host) host=$a ;; --port) port=$a ;; esac; prev=$a; done\nenv -u ${launchMark} setsid ${node} -e ${JSON.stringify(holder)} "$host" "$port" </dev/null >/dev/null 2>&1 &\necho $! >> ${JSON.stringify(join(dir, "port-holders.pids"))}\nfor i in $(seq 1 100); do ss -Htan "sport = :$port" | grep -q . && break; sleep 0.05; done\n${words}\nexit 1\n`;
  // Listens on the port after the one it is given (--port + 1), on the host it is given, and stays.
  const elsewhere = join(dir, "listen-elsewhere.cjs");
  await writeFile(
    elsewhere,
    `const net = require("node:net"); const a = process.argv.slice(2); const v = (f) => a[a.indexOf(f) + 1]; net.createServer(() => {}).listen(Number(v("--port")) + 1, v("--host"));\n`,
  );
  const coordinatorDoes = (action: string): string => `#!/bin/sh\ncase " $* " in\n  *" --node-id coordinator "*) ${action} ;;\nesac\nexec ${engine} "$@"\n`;
  const scripts: Record<StandIn, string> = {
    exit3: `#!/bin/sh\necho "stand-in engine: cannot open the model" >&2\nexit 3\n`,
    // exit(-1), as C, Python and Node.js programs write it: status 255, which no signal gives.
    exit255: `#!/bin/sh\necho "stand-in engine: CUDA error" >&2\nexit 255\n`,
    // What Node.js reports when a listen finds its port taken (here as shard-engine logs it).
    listenRefused: portTakenThen(`echo '{"level":50,"msg":"stage failed to start","err":"listen EADDRINUSE: address already in use 127.0.0.1:39600"}' >&2`),
    // An engine that puts itself in the background, as a `--daemon` option does: the real engine in
    // a session of its own, its pid appended to daemonized.pids; the first process exits 0.
    daemonizes: `#!/bin/sh\nsetsid ${engine} "$@" </dev/null >/dev/null 2>&1 &\necho $! >> ${JSON.stringify(join(dir, "daemonized.pids"))}\nexit 0\n`,
    // The words Python (mlx-lm), Go, Rust and C programs print for EADDRINUSE.
    listenRefusedPython: portTakenThen(`echo "OSError: [Errno 98] Address already in use" >&2`),
    // A coordinator whose HTTP address (its --host and --port) is taken after the launch found it
    // free, which it says as Python does; real stages.
    coordinatorPortTaken: coordinatorDoes(`exec ${JSON.stringify(join(dir, "listenRefusedPython.sh"))} "$@"`),
    // The same words with nothing holding the port: an engine that says them of another fault.
    listenRefusedFalsely: `#!/bin/sh\necho "OSError: [Errno 98] Address already in use" >&2\nexit 1\n`,
    sleep: `#!/bin/sh\necho "stand-in engine: sleeping without listening"\nexec sleep 60\n`,
    // stage-0 writes 80 MB of log (past the 64 MiB limit) at once, then loads for a minute without listening.
    stageFloodsWhileLoading: `#!/bin/sh\ncase " $* " in\n  *" --node-id stage-0 "*) yes "stand-in stage: loading" | head -c 80000000; exec sleep 60 ;;\nesac\nexec ${engine} "$@"\n`,
    // Every stage binds the port after its own: it runs, and never listens where it was asked to.
    stageListensElsewhere: `#!/bin/sh\ncase " $* " in\n  *" --node-id stage-"*) exec ${node} ${JSON.stringify(elsewhere)} "$@" ;;\nesac\nexec ${engine} "$@"\n`,
    // Stages start together: stage-0 loads for a minute (not listening yet) while stage-1 dies at load.
    stageDiesWhileStageLoads: `#!/bin/sh\ncase " $* " in\n  *" --node-id stage-0 "*) exec sleep 60 ;;\n  *" --node-id stage-1 "*) sleep 1; echo "stand-in stage: fatal: cannot allocate the KV cache" >&2; exit 1 ;;\nesac\nexec ${engine} "$@"\n`,
    coordinatorListensElsewhere: coordinatorDoes(`exec ${node} ${JSON.stringify(elsewhere)} "$@"`),
    coordinatorExits: coordinatorDoes(`echo "stand-in coordinator: exiting" >&2; sleep 0.2; exit 4`),
    coordinatorNeverHealthy: coordinatorDoes(`exec ${node} ${JSON.stringify(server)} loading "$@"`),
    // As a stage that runs out of memory while it loads its layers would.
    stageDiesWhileServerLoads: stageDiesWhileServerLoads("stand-in stage: fatal: out of memory while loading layer 3"),
    // The same stage saying, as a Python engine does, that its port was taken, once it had listened
    // on it (nothing holds it when it exits).
    stagePortTakenWhileServerLoads: stageDiesWhileServerLoads("OSError: [Errno 98] Address already in use"),
    coordinatorNotFound: coordinatorDoes(`exec ${node} ${JSON.stringify(server)} elsewhere "$@"`),
    coordinatorFailsCompletions: coordinatorDoes(`exec ${node} ${JSON.stringify(server)} broken "$@"`),
    coordinatorAnswersHtml: coordinatorDoes(`exec ${node} ${JSON.stringify(server)} html "$@"`),
    coordinatorNeverCompletes: coordinatorDoes(`exec ${node} ${JSON.stringify(server)} hung "$@"`),
    coordinatorWarming: coordinatorDoes(`exec ${node} ${JSON.stringify(server)} warming "$@"`),
    coordinatorCold: coordinatorDoes(`exec ${node} ${JSON.stringify(server)} cold "$@"`),
    coordinatorEndlessBody: coordinatorDoes(`exec ${node} ${JSON.stringify(server)} endless "$@"`),
    coordinatorBodyStalls: coordinatorDoes(`exec ${node} ${JSON.stringify(server)} stalls "$@"`),
    // The real coordinator, told to bind 0.0.0.0 whatever --host it was given (as an engine that ignores it does).
    coordinatorBindsEverywhere: coordinatorDoes(`for a; do shift; if [ "$prev" = --host ]; then set -- "$@" 0.0.0.0; else set -- "$@" "$a"; fi; prev=$a; done`),
  };
  const paths = {} as Record<StandIn, string>;
  for (const [name, text] of Object.entries(scripts) as Array<[StandIn, string]>) {
    const path = join(dir, `${name}.sh`);
    await writeFile(path, text);
    await chmod(path, 0o755);
    paths[name] = path;
  }
  return paths;
}

// A coordinator stand-in: "loading" answers /health 503 for ever; "elsewhere" answers 404 to
// everything (a server whose routes are not an engine's); "broken" answers /health 200 but fails
// every completion (a listening server that is not a working pipeline); "hung" answers /health 200
// and never answers a completion (a pipeline that hangs); "html" answers completions with a page;
// "endless" answers them 200 and sends a body without end (64 KiB at a time, as fast as it goes);
// "stalls" answers them 200, sends the start of a body and nothing more.
const coordinatorStandIn = `import { createServer } from "node:http";
const [mode, ...args] = process.argv.slice(2);
const value = (flag) => args[args.indexOf(flag) + 1];
const server = createServer((req, res) => {
  req.resume();
  if (mode === "elsewhere") {
    res.writeHead(404, { "content-type": "text/plain" });
    res.end("Not Found\\n");
    return;
  }
  if (mode === "endless" && req.url !== "/health") {
    res.writeHead(200, { "content-type": "application/json" });
    const chunk = Buffer.alloc(65536, 0x78);
    const more = () => { while (res.write(chunk)); };
    res.on("drain", more);
    res.on("error", () => undefined);
    more();
    return;
  }
  if (mode === "stalls" && req.url !== "/health") {
    res.writeHead(200, { "content-type": "application/json" });
    res.write('{"choices":[');
    return;
  }
  if (mode === "html" && req.url !== "/health") {
    res.writeHead(200, { "content-type": "text/html" });
    res.end("<html><body>proxy login</body></html>");
    return;
  }
  if (req.url === "/health") {
    res.writeHead(mode === "loading" ? 503 : 200, { "content-type": "application/json" });
    res.end(mode === "loading" ? '{"error":{"code":503,"message":"Loading model"}}' : '{"status":"ok"}');
    return;
  }
  if (mode === "hung") return;
  // "warming": a model that loads behind a /health of 200 — 503 for 1.5 s, then a completion;
  // "cold": 503 for ever.
  if (mode === "warming" || mode === "cold") {
    const loaded = mode === "warming" && process.uptime() > 1.5;
    res.writeHead(loaded ? 200 : 503, { "content-type": "application/json" });
    res.end(loaded ? '{"choices":[{"text":"x","index":0,"finish_reason":"length"}],"usage":{"completion_tokens":1}}' : '{"error":{"code":503,"message":"Loading model"}}');
    return;
  }
  res.writeHead(500, { "content-type": "application/json" });
  res.end('{"error":{"message":"stand-in: pipeline broken","type":"server_error"}}');
});
server.listen(Number(value("--port")), value("--host"), () => console.log("stand-in coordinator listening (" + mode + ")"));
process.on("SIGTERM", () => process.exit(0));
`;
