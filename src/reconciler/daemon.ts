/**
 * The daemon: one per watched directory. It watches the definitions and the settings, feeds
 * cluster names into the work queue, resyncs periodically (drift, e.g. a process killed behind
 * its back), and on start rebuilds what runs from the ledger (adopt, finish a teardown, or clean
 * up). SIGINT/SIGTERM stop watching and leave clusters running, unless told to tear down.
 */
import { mkdir, readdir, rm, stat } from "node:fs/promises";
import type { Server } from "node:http";
import { dirname, join, resolve } from "node:path";
import { watch } from "chokidar";
import type { Logger } from "pino";
import type { LaunchDeadlines } from "../launch/index.js";
import { startRouter, watchRouterAnswers, type RouterAnswersWatch, type RunningRouter } from "../router/index.js";
import { definitionsDirMissing, loadSettings, type Settings } from "../spec/index.js";
import { isShardctlError, messageOf, ShardctlError } from "../errors/index.js";
import { checkWritableFolders } from "./check-writable-folders.js";
import { sweepDrafts } from "../files/index.js";
import { daemonIdOf } from "./daemon-id.js";
import { acquireDaemonLock } from "./daemon-lock.js";
import { createNodePool } from "../cluster/index.js";
import { dashboardTokenOf, startDashboard, type Dashboard } from "../dashboard/index.js";
import { dashboardSource } from "./dashboard-source.js";
import { Reconciler } from "./reconciler.js";
import { WorkQueue } from "./queue/work-queue.js";
import { watchDefinitions } from "./watch-definitions.js";
import { isOwnedBy } from "./decision-inputs.js";
import { watchRouterConfig } from "./watch-router-config.js";
import { routerHealthUrl } from "./router-health-url.js";
import { watchDirectoryTarget } from "./watch-directory-target.js";
import { settleLockReleases } from "../staging/index.js";
import type { MonitorTuning } from "./world.js";

export interface DaemonOptions {
  /** Watched directory of definitions. */
  dir: string;
  settingsFile: string;
  log: Logger;
  /** Tear every cluster down on stop (the demo). Default false: clusters are desired state. */
  teardownOnExit?: boolean;
  /** Override the settings' resync period, ms (tests). */
  resyncMs?: number;
  /** Debounce of file events, ms. Default 100. */
  debounceMs?: number;
  launchDeadlines?: Partial<LaunchDeadlines>;
  monitor?: MonitorTuning;
  /** The watch of the router's health URL (tests shorten it); defaults in `routerWatchDefaults`. */
  routerWatch?: Partial<RouterWatchTuning>;
}

/** How often and how patiently the daemon asks whether the router answers. */
export type RouterWatchTuning = {
  /** Between probes, ms. */
  intervalMs: number;
  /** Longest wait for an answer, ms: patient, as a loaded machine answers late. */
  timeoutMs: number;
  /** Probes without an answer in a row before the router is said not to answer. */
  strikes: number;
};

/** A router killed is said within about 4 s, one that hangs within about 10 s. */
export const routerWatchDefaults: RouterWatchTuning = { intervalMs: 2_000, timeoutMs: 3_000, strikes: 2 };

export interface Daemon {
  settings: Settings;
  /** The embedded router's URL, when it runs. */
  routerUrl?: string;
  /** The dashboard's URL, when `[daemon] ui_address` is set. */
  uiUrl?: string;
  /** Resolves when no pass is queued or running. */
  whenIdle(): Promise<void>;
  /**
   * Resolves, with why, when this daemon must stop on its own: another daemon took its directory's
   * lock while its lock file was gone. It then stops detached (see stop), whatever teardownOnExit says.
   */
  lost: Promise<string>;
  /**
   * Resolves, with why, when the definitions directory, given through a symbolic link, leads
   * somewhere else now (a deployment swapped its `current` link): this daemon's lock, file watch
   * and status files are the old target's, so it must be stopped detached and started again.
   */
  moved: Promise<string>;
  /** Stop; `detach` leaves the clusters running even under teardownOnExit. */
  stop(options?: { detach?: boolean }): Promise<void>;
}

/** Directory where `shardctl reconcile <name>` drops its requests: `requests` in the daemon's state directory. */
export function requestsDirOf(stateDir: string): string {
  return join(stateDir, "requests");
}

export async function startDaemon(options: DaemonOptions): Promise<Daemon> {
  const dir = resolve(options.dir);
  if ((await stat(dir).catch(() => undefined))?.isDirectory() !== true) {
    throw definitionsDirMissing(dir);
  }
  const settings = await loadSettings(options.settingsFile);
  // Refused before anything starts: a dashboard off loopback without its token, and folders the
  // daemon must write but cannot (each launch would otherwise run whole before failing there).
  const uiToken = dashboardTokenOf(settings);
  await checkWritableFolders(settings, options.settingsFile);
  // prom-client is loaded by the daemon alone, not by every command that reads a status; before
  // the lock is taken, so that a failure to load it leaves no lock behind.
  const { DaemonMetrics } = await import("./metrics.js");
  let loseLock: (why: string) => void = () => undefined;
  const lost = new Promise<string>((resolve) => (loseLock = resolve));
  const lock = await acquireDaemonLock(
    dir,
    settings.daemon.heartbeatSeconds * 1000,
    (otherPid) => {
      const why = `another shardctl daemon (pid ${otherPid}) took the lock of ${dir} while this daemon's lock file was gone (a \`git clean\` removes it, and a daemon started meanwhile finds none): two daemons would each act on every cluster, so this one stops, leaving its clusters running for that one to adopt`;
      options.log.error({ otherPid }, why);
      loseLock(why);
    },
    settings.daemon.stateDir,
    (failure) =>
      failure === undefined
        ? options.log.info({ dir }, "the lock's heartbeat is written again")
        : options.log.warn(
            { dir, err: failure },
            "cannot write the lock's heartbeat in the definitions folder: status, wait and reconcile take this daemon for a silent one until it can (is the folder read-only, or gone?)",
          ),
  );
  const log = options.log;
  // Drafts of whole-file writes a killed daemon left (status files, the router's YAML, the ledger):
  // never read, but they pile up in a checkout CI may commit.
  for (const folder of [dir, join(settings.daemon.stateDir, "ledger"), ...(settings.router.config === undefined ? [] : [dirname(settings.router.config)])]) {
    const removed = await sweepDrafts(folder);
    if (removed.length > 0) log.info({ folder, removed }, "removed drafts a killed process left");
  }
  let tellMoved: (why: string) => void = () => undefined;
  const moved = new Promise<string>((resolve) => (tellMoved = resolve));
  // Where the directory led as the lock was taken there (see watchDirectoryTarget).
  const target = dirname(lock.file);
  const targetWatch = watchDirectoryTarget(dir, target, settings.daemon.heartbeatSeconds * 1000, (now) => {
    const why = `the definitions directory ${dir} leads to ${now} now (it led to ${target} when the daemon started): the daemon starts again on it, leaving its clusters running to adopt`;
    log.warn({ dir, was: target, now }, why);
    tellMoved(why);
  });
  const daemonId = await daemonIdOf(settings.daemon.stateDir);
  const pool = createNodePool(settings);
  const metrics = new DaemonMetrics();

  // The queue and the reconciler refer to each other: passes requeue, the queue runs passes.
  const queue: WorkQueue = new WorkQueue((name, stepAside) => reconciler.reconcile(name, stepAside));
  const reconciler: Reconciler = new Reconciler({
    dir,
    settingsFile: options.settingsFile,
    stateDir: settings.daemon.stateDir,
    ...(daemonId === undefined ? {} : { daemonId }),
    pool,
    log,
    requeue: (name) => queue.add(name),
    // The embedded router (started below) serves the config the registrar edits: it reloads it at
    // once rather than when its file watch fires, so Ready is never said before it routes the model.
    afterRouterEdit: async () => {
      await router?.reload();
    },
    ...(options.launchDeadlines === undefined ? {} : { launchDeadlines: options.launchDeadlines }),
    ...(options.monitor === undefined ? {} : { monitor: options.monitor }),
    routerAnswer: () => routerWatch?.now(),
    // The pass's log line is the reconciler's summary (summarize-pass.ts): one line a pass.
    onPass: (name, report, durationMs) => {
      metrics.recordPass(report, durationMs);
      // A cluster torn down for good, or launched anew (its previous launch, on other ports, torn
      // down first), lets go of what it held: ports, a transport range, its router backend name, its
      // nodes' memory. A cluster that failed on them tries again now, not at the end of its back-off
      // (up to a minute). Only a success wakes them: two waiting clusters' failures never wake each other.
      if ((report.action === "prune" || report.action === "stop" || report.action === "launch") && report.result === "success")
        for (const waiting of reconciler.clustersWaitingOnOthers(name)) queue.add(waiting);
    },
  });
  metrics.follow(reconciler.feed);
  const enqueueAll = async (): Promise<void> => {
    for (const name of await reconciler.knownClusters()) queue.add(name);
  };

  // What has started so far, undone in reverse when a later part of the start fails: the start
  // is all or nothing (a taken port leaves no pass running, no watcher and no lock behind).
  const started: Array<() => Promise<unknown>> = [() => lock.release(), async () => targetWatch.stop(), () => pool.close()];
  const undoStart = async (): Promise<void> => {
    for (const undo of started.reverse()) await undo().catch(() => undefined);
  };
  let router: RunningRouter | undefined;
  let routerWatch: RouterAnswersWatch | undefined;
  let metricsServer: Server | undefined;
  let dashboard: Dashboard | undefined;
  let watcher: Awaited<ReturnType<typeof watchDefinitions>>;
  let requestWatcher: ReturnType<typeof watch>;
  let requestSweep: NodeJS.Timeout | undefined;
  const closeMetrics = (): Promise<void> => new Promise<void>((r) => (metricsServer === undefined ? r() : metricsServer.close(() => r())));
  try {
    // Every listener first, before any work is queued. Each is tried even when one before it could
    // not listen, so a daemon whose addresses are taken names every one at once, not one per start.
    const cannotListen: ShardctlError[] = [];
    const listen = async (start: () => Promise<void>): Promise<void> => {
      await start().catch((error: unknown) => {
        if (!isShardctlError(error) || !error.reason.endsWith("ListenFailed")) throw error;
        cannotListen.push(error);
      });
    };
    // The embedded router serves the same config the registrar edits.
    if (settings.router.embedded && settings.router.kind === "continuum" && settings.router.config !== undefined) {
      const configFile = settings.router.config;
      await listen(async () => {
        const running = (router = await startRouter({
          configFile,
          upstreamIdleMs: settings.router.upstreamIdleSeconds * 1000,
          logger: log.child({ component: "router" }),
        }));
        started.push(() => running.close());
        log.info({ url: running.url }, "embedded router listening");
      });
    }
    if (settings.daemon.metricsAddress !== undefined) {
      const address = settings.daemon.metricsAddress;
      await listen(async () => {
        metricsServer = await metrics.serve(address, (dropped, limit) =>
          log.warn({ dropped, limit }, "metrics connections dropped: this many clients hold connections already (clients that send no request are cut after 10 s)"),
        );
        started.push(closeMetrics);
        log.info({ address }, "metrics listening");
      });
    }
    if (settings.daemon.uiAddress !== undefined) {
      const address = settings.daemon.uiAddress;
      await listen(async () => {
        const source = dashboardSource({ dir, settingsFile: options.settingsFile, reconciler, pool, stateDir: settings.daemon.stateDir });
        const serving = (dashboard = await startDashboard({
          address,
          token: uiToken,
          source,
          log: log.child({ component: "dashboard" }),
          // The page's sign of life, at the lock's rhythm.
          stream: { heartbeatMs: settings.daemon.heartbeatSeconds * 1000 },
        }));
        started.push(() => serving.close());
        // Not `token`: the log redacts fields of that name, which hid whether one is required.
        log.info({ url: serving.url, tokenRequired: uiToken !== undefined }, "dashboard listening");
      });
    }
    const [first, ...others] = cannotListen;
    if (first !== undefined) {
      if (others.length === 0) throw first;
      throw new ShardctlError(first.reason, [first, ...others].map((e) => e.message).join("\n"), { terminal: true, cause: first });
    }

    // Watch the definitions and the settings.
    // Undone in reverse: the passes end first, then what they left watching is detached.
    started.push(() => reconciler.detachAll());
    started.push(() => queue.stop());
    watcher = await watchDefinitions({
      dir,
      settingsFile: options.settingsFile,
      debounceMs: options.debounceMs ?? 100,
      onDefinition: (name) => {
        // A swapped link's files are the next daemon's to act on (this one starts again on them).
        if (targetWatch.movedNow()) return;
        queue.forgetFailures(name);
        queue.add(name);
      },
      onSettings: () => {
        if (!targetWatch.movedNow()) void enqueueAll();
      },
      onStatusFile: (name) =>
        void reconciler.restoreStatus(name).catch((error: unknown) => log.error({ cluster: name, err: error }, "could not put back the status file")),
      onError: (error) =>
        log.warn(
          { err: error, dir },
          "the watch of the definitions reported an error (an entry it cannot look at, or no watch or descriptor left): it goes on where it can, and each resync looks at the directory again",
        ),
    });
    started.push(() => watcher.close());
    // The router's YAML, edited by others: a cluster whose backend left it gets a pass at once.
    if (settings.router.kind === "continuum" && settings.router.config !== undefined) {
      const stopRouterWatch = watchRouterConfig({
        configFile: settings.router.config,
        stateDir: settings.daemon.stateDir,
        owns: (entry) => isOwnedBy(entry, dir),
        onLost: (name) => {
          log.info({ cluster: name, file: settings.router.config }, "the router config no longer lists the cluster's backend: a pass looks at once");
          queue.add(name);
        },
        log,
      });
      started.push(async () => stopRouterWatch());
    }
    // Whether the router answers at all: a registration stays in its list while it is dead or hung.
    // Each change gets every cluster a pass, which says it in Registered and the health.
    const routerTuning = { ...routerWatchDefaults, ...options.routerWatch };
    const watchingRouter = (routerWatch = watchRouterAnswers({
      ...routerTuning,
      target: async () => routerHealthUrl(await reconciler.settingsNow(), router?.url),
      onChange: (answer) => {
        if (answer.answering) log.info({ url: answer.url }, "the router answers again");
        else
          log.warn(
            { url: answer.url, since: answer.since, problem: answer.problem },
            "the router does not answer: requests sent through it fail; the clusters registered there are Degraded until it does",
          );
        void enqueueAll();
      },
    }));
    metrics.followRouter(() => watchingRouter.now());
    started.push(async () => watchingRouter.stop());

    // `shardctl reconcile <name>` requests.
    const requestsDir = requestsDirOf(settings.daemon.stateDir);
    await mkdir(requestsDir, { recursive: true });
    // Entries that are not requests, said once each (the directory is looked at every second).
    const notRequests = new Set<string>();
    const takeEachRequest = async (): Promise<void> => {
      for (const entry of await readdir(requestsDir, { withFileTypes: true }).catch(() => [])) {
        const name = entry.name;
        if (name.endsWith(".tmp") || notRequests.has(name)) continue;
        if (!entry.isFile()) {
          notRequests.add(name);
          log.warn({ entry: join(requestsDir, name) }, "ignoring this entry of the requests directory: a reconcile request is a file named after its cluster");
          continue;
        }
        try {
          // Acknowledged (the request file removed) only once the status says so.
          await reconciler.requestRetry(name).catch((error: unknown) => log.error({ cluster: name, err: error }, "could not record a reconcile request"));
          await rm(join(requestsDir, name), { force: true });
          queue.forgetFailures(name);
          queue.add(name);
        } catch (error) {
          // A request that cannot be removed (permissions): said once, never the end of the daemon.
          notRequests.add(name);
          log.warn({ entry: join(requestsDir, name), err: error }, "cannot take this entry of the requests directory as a reconcile request");
        }
      }
    };
    // One look at the directory at a time, and one more after it when asked meanwhile.
    let taking: Promise<void> | undefined;
    let again = false;
    const takeRequests = (): Promise<void> => {
      if (taking !== undefined) {
        again = true;
        return taking;
      }
      taking = (async () => {
        do {
          again = false;
          await takeEachRequest();
        } while (again);
      })().finally(() => (taking = undefined));
      return taking;
    };
    const requests = (requestWatcher = watch(requestsDir, { ignoreInitial: true, depth: 0 }));
    started.push(() => requests.close());
    // A request dropped within 100 ms of the one just taken (a second click, two `reconcile`s) comes
    // as "change": the watcher reads an unlink and an add of one name that close together as an
    // atomic rewrite. Under load even that can be missed, so the directory is also looked at every
    // second: a request is taken within about a second whatever the watcher reports.
    requestWatcher.on("add", () => void takeRequests()).on("change", () => void takeRequests());
    requestSweep = setInterval(() => void takeRequests(), 1_000);
    requestSweep.unref();
    started.push(async () => clearInterval(requestSweep));
    await takeRequests();

    // Rebuild from the ledger and the definitions: every known cluster gets a pass now.
    await reconciler.clearStalledMarks(settings);
    await reconciler.holdRecordedMemory(settings);
    await enqueueAll();
  } catch (error) {
    await undoStart();
    throw error;
  }

  // Periodic resync, jittered so many daemons (or clusters) do not pulse together.
  const resyncMs = options.resyncMs ?? settings.daemon.resyncSeconds * 1000;
  let resyncTimer: NodeJS.Timeout | undefined;
  const scheduleResync = (): void => {
    resyncTimer = setTimeout(
      () => {
        // Whatever fails here is said and the next resync comes all the same: the daemon outlives it.
        void reconciler
          .resyncCandidates()
          .then((names) => names.forEach((name) => queue.add(name)))
          .then(() => reconciler.sweepRouter())
          .catch((error: unknown) => log.error({ err: messageOf(error) }, "the periodic resync failed; it is tried again at the next one"))
          .finally(scheduleResync);
      },
      resyncMs * (0.9 + Math.random() * 0.2),
    );
    resyncTimer.unref();
  };
  scheduleResync();

  log.info({ dir }, "daemon watching");
  let stopping: Promise<void> | undefined;
  return {
    settings,
    ...(router === undefined ? {} : { routerUrl: router.url }),
    ...(dashboard === undefined ? {} : { uiUrl: dashboard.url }),
    whenIdle: () => queue.whenIdle(),
    lost,
    moved,
    stop: ({ detach = false } = {}) =>
      (stopping ??= (async () => {
        clearTimeout(resyncTimer);
        targetWatch.stop();
        routerWatch?.stop();
        // The dashboard first takes no more requests: nobody asks for a pass (or a plan) of a daemon
        // that is stopping. Its streams stay open until the end, so the pages see the stop's own
        // statuses (a teardown's Stopped) rather than the last word from before it.
        dashboard?.stopping();
        await watcher.close();
        await requestWatcher.close();
        clearInterval(requestSweep);
        reconciler.callOffLaunches();
        await queue.stop();
        try {
          if (options.teardownOnExit === true && !detach) await reconciler.teardownAll();
          else await reconciler.detachAll();
        } finally {
          // Released whatever the teardown did: the next daemon needs the lock and the ports.
          await dashboard?.close();
          await router?.close();
          await closeMetrics();
          // The nodes' file locks of stagings the stop cut are given back over the connections
          // before they close (within 10 s): another daemon or `shardctl stage` need not wait out
          // their stale bound (two minutes).
          await settleLockReleases();
          await pool.close();
          await lock.release();
        }
        log.info("daemon stopped");
      })()),
  };
}
