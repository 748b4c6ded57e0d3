/**
 * Prometheus metrics of the daemon (prom-client): passes by result, pass duration, clusters by
 * health, stages up, and, once served, the process's own (prom-client's defaults, under their
 * usual names: resident memory, heap, open file descriptors, event-loop lag), which is how a daemon
 * run for weeks is watched for growth. Served as text on `[daemon] metrics_address` when set.
 */
import { createServer, type Server } from "node:http";
import { refuseForeignRequest } from "../browser-guard/index.js";
import { connectionLimit, limitConnections, limitedServerOptions } from "../http-limits/index.js";
import { isLoopbackAddress } from "../spec/index.js";
import { messageOf, ShardctlError } from "../errors/index.js";
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from "prom-client";
import type { PassReport } from "./compose-status.js";
import { healthValues, livenessValues, type ClusterStatus, type Health } from "./status/index.js";
import type { StatusFeed } from "./status-feed.js";
import type { RouterAnswer } from "../router/index.js";
import { isServing } from "./verdicts.js";

export class DaemonMetrics {
  readonly registry = new Registry();
  private readonly passes = new Counter({
    name: "shardctl_reconcile_passes_total",
    help: "Reconcile passes by result",
    labelNames: ["result"],
    registers: [this.registry],
  });
  private readonly duration = new Histogram({
    name: "shardctl_reconcile_pass_duration_seconds",
    help: "Duration of reconcile passes",
    // Up to an hour: a pass that stages a large model over a home link takes tens of minutes.
    buckets: [0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30, 120, 600, 1800, 3600],
    registers: [this.registry],
  });
  private readonly clusters = new Gauge({ name: "shardctl_clusters", help: "Clusters by health", labelNames: ["health"], registers: [this.registry] });
  private readonly stagesUp = new Gauge({ name: "shardctl_stages_up", help: "Stage processes alive, all clusters", registers: [this.registry] });
  /** Per cluster: one series set per definition file (an invalid name too: prom-client escapes it), deleted when the cluster is pruned. */
  private readonly clusterHealth = new Gauge({
    name: "shardctl_cluster_health",
    help: "1 for the cluster's current health word, 0 for the others (the status file's health)",
    labelNames: ["cluster", "health"],
    registers: [this.registry],
  });
  private readonly clusterReady = new Gauge({
    name: "shardctl_cluster_ready",
    help: "1 when the status file's Ready is True",
    labelNames: ["cluster"],
    registers: [this.registry],
  });
  private readonly clusterStages = new Gauge({
    name: "shardctl_cluster_stages",
    help: "Stage processes per cluster by liveness: alive, gone, or unknown (its node could not be asked)",
    labelNames: ["cluster", "liveness"],
    registers: [this.registry],
  });
  private readonly deaths = new Counter({
    name: "shardctl_cluster_deaths_total",
    help: "Launches of the cluster that lost a process (each torn down, and relaunched within the restart budget), by the death's reason",
    labelNames: ["cluster", "reason"],
    registers: [this.registry],
  });
  /** The reasons each cluster's deaths were counted under, for their removal with it. */
  private readonly deathReasons = new Map<string, Set<string>>();
  /** Whether the router answers, as the daemon's watch last judged; undefined: not watched (no series). */
  private routerAnswer: () => RouterAnswer | undefined = () => undefined;
  private readonly routerUp = new Gauge({
    name: "shardctl_router_up",
    help: "1 while the router answers at the health URL `url`, 0 while it does not (absent when the router is not watched)",
    // Labelled by the URL asked: a series without labels could not be absent (prom-client shows it as 0).
    labelNames: ["url"],
    registers: [this.registry],
    collect: () => {
      const answer = this.routerAnswer();
      this.routerUp.reset();
      if (answer !== undefined) this.routerUp.set({ url: answer.url }, answer.answering ? 1 : 0);
    },
  });
  /** Whether the process's own figures are collected (once per registry: a second call would register them twice). */
  private collectingProcess = false;
  private readonly health = new Map<string, Health>();
  private readonly stages = new Map<string, number>();

  /** A pass ended: counted and timed (the gauges follow the status feed, see follow). */
  recordPass(report: PassReport, durationMs: number): void {
    this.passes.inc({ result: report.result });
    this.duration.observe(durationMs / 1000);
  }

  /** Gauges follow every status the daemon composes (deaths and retries between passes included), not only pass ends. */
  follow(feed: StatusFeed): void {
    for (const result of ["success", "waiting", "failed", "stalled"]) this.passes.inc({ result }, 0);
    feed.on("status", (status) => this.setStatus(status));
    feed.on("death", (cluster, reason) => {
      this.deaths.inc({ cluster, reason });
      this.deathReasons.set(cluster, (this.deathReasons.get(cluster) ?? new Set()).add(reason));
    });
    feed.on("removed", (cluster) => {
      for (const reason of this.deathReasons.get(cluster) ?? []) this.deaths.remove({ cluster, reason });
      this.deathReasons.delete(cluster);
      this.health.delete(cluster);
      this.stages.delete(cluster);
      for (const health of healthValues) this.clusterHealth.remove({ cluster, health });
      this.clusterReady.remove({ cluster });
      for (const liveness of livenessValues) this.clusterStages.remove({ cluster, liveness });
      this.totals();
    });
  }

  /** `shardctl_router_up` reads the router watch's judgement as it is scraped. */
  followRouter(answer: () => RouterAnswer | undefined): void {
    this.routerAnswer = answer;
  }

  private setStatus(status: ClusterStatus): void {
    const name = status.cluster;
    const alive = (status.stages ?? []).filter((s) => s.alive).length;
    this.health.set(name, status.health);
    this.stages.set(name, alive);
    for (const health of healthValues) this.clusterHealth.set({ cluster: name, health }, health === status.health ? 1 : 0);
    this.clusterReady.set({ cluster: name }, isServing(status) ? 1 : 0);
    for (const liveness of livenessValues)
      this.clusterStages.set({ cluster: name, liveness }, (status.stages ?? []).filter((s) => (s.liveness ?? (s.alive ? "alive" : "gone")) === liveness).length);
    this.totals();
  }

  private totals(): void {
    for (const value of healthValues) this.clusters.set({ health: value }, [...this.health.values()].filter((h) => h === value).length);
    this.stagesUp.set([...this.stages.values()].reduce((a, b) => a + b, 0));
  }

  /**
   * Serve `/metrics` on host:port; resolves once listening. Its connections are capped and its
   * heads timed as the dashboard's are (a flood of idle connections once took every descriptor of
   * the daemon, and the daemon with them), and on loopback it serves loopback host names only (a
   * page of another site, through DNS rebinding, does not read the clusters' health).
   */
  async serve(address: string, warn: (dropped: number, limit: number) => void = () => undefined): Promise<Server> {
    const [host, port] = splitAddress(address);
    if (!this.collectingProcess) collectDefaultMetrics({ register: this.registry });
    this.collectingProcess = true;
    const loopback = isLoopbackAddress(address);
    const server = createServer(limitedServerOptions(30_000), (req, res) => {
      const refusal = refuseForeignRequest(req, { loopback, what: "the metrics endpoint" });
      if (refusal !== undefined) {
        res.writeHead(403).end(`${refusal}\n`);
        return;
      }
      if (new URL(req.url ?? "/", "http://metrics.invalid").pathname !== "/metrics") {
        res.writeHead(404).end("not found\n");
        return;
      }
      this.registry.metrics().then(
        (text) => res.writeHead(200, { "content-type": this.registry.contentType }).end(text),
        (error: unknown) => res.writeHead(500).end(String(error)),
      );
    });
    // A sixteenth of the daemon's descriptors at most (beside the dashboard's eighth and the router's quarter).
    limitConnections(server, connectionLimit(1 / 16, 256), warn);
    await new Promise<void>((resolve, reject) => {
      server.once("error", (error) =>
        reject(
          new ShardctlError(
            "MetricsListenFailed",
            `the metrics endpoint cannot listen on ${address} ([daemon] metrics_address in the settings file): ${messageOf(error)}; choose a free address there, or stop what holds it`,
            { terminal: true, cause: error },
          ),
        ),
      );
      server.listen(port, host, () => resolve());
    });
    return server;
  }
}

function splitAddress(address: string): [string, number] {
  const at = address.lastIndexOf(":");
  return [address.slice(0, at).replace(/^\[|\]$/g, ""), Number(address.slice(at + 1))];
}
