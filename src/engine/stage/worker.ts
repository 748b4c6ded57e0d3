/**
 * A stage worker: loads only its layers, binds its transport address, accepts the coordinator and
 * (after stage 0) the previous stage, dials the next stage once the coordinator is connected (the
 * last stage dials the coordinator's control address instead: its results go back on that link, as
 * mlxcel's stages dial the coordinator's cluster-file address with theirs), and runs sequences as
 * their messages arrive. Messages are handled in arrival order, one at a time; different stages
 * work on different sequences at once, which is where pipeline throughput comes from. Losing any
 * link after it was established — closed, reset, or silent for longer than the liveness bound
 * (transport/liveness.ts) — ends the process: with exit status 69 and a line naming the peer when it
 * went silent, 1 otherwise (exit-status.ts). While the stage computes (synchronously, on this
 * thread) a helper thread keeps its links heartbeating.
 */
import { createServer, type Server, type Socket } from "node:net";
import { failureExitStatus, logAnsweringPeers, logLostPeer, logSilentPeer, peerSilentExitStatus, type SilentPeer } from "../exit-status.js";
import { KernelRuntime } from "../kernels/index.js";
import type { Logger } from "../log.js";
import { joinHostPort } from "../transport/index.js";
import { limitConnections } from "../coordinator/connection-limits.js";
import { LogThrottle, shownMessage } from "../log-throttle.js";
import { residentMemory } from "../memory.js";
import { Sampler, type SequenceCache, ModelShard, type ModelConfig, usefulThreads } from "../model/index.js";
import {
  acceptLink,
  ComputeHeartbeat,
  decodeActivations,
  defaultLiveness,
  decodePrepare,
  decodeRun,
  noToken,
  decodeSeq,
  dialLinkUntil,
  encodeActivations,
  encodeError,
  encodePrepare,
  encodeResult,
  encodeSeq,
  HandshakeAbandoned,
  Kind,
  type Link,
  type PeerRole,
  seqOf,
} from "../transport/index.js";

/** What one pipeline stage worker needs to start: its layer range of the model, its address and its next stage. */
export interface StageWorkerOptions {
  modelDir: string;
  config: ModelConfig;
  nodeId: string;
  stage: number;
  stageCount: number;
  range: { start: number; end: number };
  /** Threads computing each product of the stage's layers. */
  threads: number;
  /** Transport address to bind. */
  host: string;
  port: number;
  /** Next stage's address, undefined on the last stage. */
  next: { host: string; port: number; nodeId: string } | undefined;
  /** The coordinator's control address (its node in the cluster file), which the last stage dials. */
  coordinatorControl: { host: string; port: number; nodeId: string };
  token: Buffer | undefined;
  /** How long to keep dialing the next stage, ms. */
  connectTimeoutMs: number;
  /** How long a computation may go without progress before its links are heartbeated no more, ms. */
  computeStallMs: number;
  log: Logger;
  /** Called when the stage must end (link lost): exit code. */
  exit: (code: number) => void;
}

interface SequenceState {
  cache: SequenceCache;
  sampler: Sampler | undefined;
}

export interface RunningStage {
  server: Server;
  close(): void;
}

/** Load the stage's weights, then listen. Resolves once listening. */
export async function startStage(o: StageWorkerOptions): Promise<RunningStage> {
  // The kernel threads and the heartbeat helper are part of the idle runtime: started (and
  // measured) before the weights.
  const threads = usefulThreads(o.config, o.threads);
  const runtime = new KernelRuntime({ threads });
  await runtime.ready();
  const heartbeat = new ComputeHeartbeat(undefined, o.computeStallMs);
  await heartbeat.start();
  try {
    const rssBeforeLoad = residentMemory().rss;
    const model = ModelShard.load(o.modelDir, o.config, o.range, { runtime });
    const rssAfterLoad = residentMemory().rss;
    o.log.info({ range: [o.range.start, o.range.end], threads, weightBytes: model.weightBytes, rssBeforeLoad, rssAfterLoad }, "stage weights loaded");
    const stage = new StageRuntime(o, model, heartbeat, rssBeforeLoad, rssAfterLoad);
    const server = createServer((socket) => stage.accept(socket));
    // Unfinished handshakes are cut after 10 s; past half the descriptors, new ones are dropped.
    limitConnections(server, o.log);
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(o.port, o.host, () => {
        server.off("error", reject);
        resolve();
      });
    });
    o.log.info({ address: joinHostPort(o.host, o.port), stage: o.stage, of: o.stageCount }, "stage listening");
    return {
      server,
      close: () => {
        stage.close(server);
        void model.close();
      },
    };
  } catch (error) {
    // A stage that cannot load or listen exits; its helper thread must not keep running meanwhile.
    heartbeat.stop();
    throw error;
  }
}

class StageRuntime {
  private coordinator: Link | undefined;
  private upstream: Link | undefined;
  private downstream: Link | undefined;
  /** The last stage's link to the coordinator's control address, which carries its results. */
  private results: Link | undefined;
  private readonly sequences = new Map<number, SequenceState>();
  private readonly logits: Float32Array;
  private closing = false;
  /** When the dial of the next hop began (performance.now() ms), while it goes on. */
  private dialingSince: number | undefined;
  /** The node id of the peer at the other end of each link. */
  private readonly peerIds = new Map<Link, string>();
  /** Hidden-state rows sent to the next stage (one per token). */
  private rowsSent = 0;

  constructor(
    private readonly options: StageWorkerOptions,
    private readonly model: ModelShard,
    private readonly heartbeat: ComputeHeartbeat,
    private readonly rssBeforeLoad: number,
    private readonly rssAfterLoad: number,
  ) {
    this.logits = new Float32Array(options.config.vocabSize);
  }

  /** Refused peers are logged at most every 10 s (anyone who reaches the port can cause them). */
  private readonly refusals = new LogThrottle();

  accept(socket: Socket): void {
    const remote = joinHostPort(socket.remoteAddress ?? "?", socket.remotePort);
    acceptLink(socket, this.options.nodeId, this.options.token).then(
      ({ link, hello }) => this.attach(link, hello.role, hello.nodeId, remote),
      (error: unknown) => {
        const message = (error as Error).message;
        // A readiness probe (connect, then close before sending a byte) is not an intruder.
        if (error instanceof HandshakeAbandoned) this.options.log.debug({ remote, err: message }, "connection closed before the handshake");
        else {
          const { log, suppressed } = this.refusals.take(message);
          if (log) this.options.log.warn({ remote, err: shownMessage(message), ...(suppressed > 0 ? { refusedSinceLastLogged: suppressed } : {}) }, "peer refused");
        }
      },
    );
  }

  close(server: Server): void {
    this.closing = true;
    server.close();
    this.heartbeat.stop();
    for (const link of [this.coordinator, this.upstream, this.downstream, this.results]) link?.close();
  }

  private attach(link: Link, role: PeerRole, peerId: string, remote: string): void {
    const taken = role === "coordinator" ? this.coordinator : this.upstream;
    // Only the coordinator's control address takes a "stage" link.
    if (role === "stage" || taken !== undefined || (role === "upstream" && this.options.stage === 0)) {
      this.options.log.warn({ remote, role }, "peer refused: role already connected or not expected here");
      link.close();
      return;
    }
    this.options.log.info({ remote, peer: link.peer }, "peer connected");
    this.peerIds.set(link, peerId);
    link.onClose((reason) => this.lost(`${role} link (${link.peer})`, reason, link, { peer: peerId, link: role }));
    link.onFrame((kind, payload) => this.handle(kind, payload));
    if (role === "upstream") {
      this.upstream = link;
      return;
    }
    this.coordinator = link;
    this.connectDownstream(link).catch((error: unknown) => {
      this.sayNextUnreachable((error as Error).message);
      this.options.exit(failureExitStatus);
    });
  }

  /**
   * Say the next stage could not be reached: src/engines/reference reads this line (its msg, next,
   * err), since a launch that fails at a later step (the coordinator giving up) failed because of it.
   * The last stage's next hop is the coordinator's control address, named the same way.
   */
  private sayNextUnreachable(err: string): void {
    this.options.log.error({ err, next: this.options.next ?? this.options.coordinatorControl }, "cannot reach the next stage");
  }

  /**
   * Dial the next stage (retrying until the deadline) — or, on the last stage, the coordinator's
   * control address — then tell the coordinator we are ready.
   */
  private async connectDownstream(coordinator: Link): Promise<void> {
    const next = this.options.next;
    if (next === undefined && this.results === undefined) await this.connectResults();
    if (next !== undefined && this.downstream === undefined) {
      const deadline = performance.now() + this.options.connectTimeoutMs;
      this.dialingSince = performance.now();
      const link = await dialLinkUntil(next.host, next.port, { role: "upstream", nodeId: this.options.nodeId }, this.options.token, deadline).finally(() => {
        this.dialingSince = undefined;
      });
      this.downstream = link;
      this.peerIds.set(link, next.nodeId);
      link.onClose((reason) => this.lost(`downstream link (${link.peer})`, reason, link, { peer: next.nodeId, link: "downstream" }));
      link.onFrame((kind) => this.options.log.warn({ kind }, "unexpected frame from the next stage"));
      this.options.log.info({ peer: link.peer }, "connected to the next stage");
    }
    coordinator.sendJson(Kind.Ready, { stage: this.options.stage, range: [this.options.range.start, this.options.range.end], weightBytes: this.model.weightBytes });
  }

  /**
   * The last stage dials the coordinator's control address from the cluster file: an address the
   * coordinator binds and this stage can reach, or the pipeline never answers.
   */
  private async connectResults(): Promise<void> {
    const control = this.options.coordinatorControl;
    const deadline = performance.now() + this.options.connectTimeoutMs;
    this.dialingSince = performance.now();
    const link = await dialLinkUntil(control.host, control.port, { role: "stage", nodeId: this.options.nodeId }, this.options.token, deadline).finally(() => {
      this.dialingSince = undefined;
    });
    this.results = link;
    this.peerIds.set(link, control.nodeId);
    link.onClose((reason) => this.lost(`results link (${link.peer})`, reason, link, { peer: control.nodeId, link: "coordinator" }));
    link.onFrame((kind) => this.options.log.warn({ kind }, "unexpected frame on the results link"));
    this.options.log.info({ peer: link.peer }, "connected to the coordinator's control address");
  }

  private lost(which: string, reason: string, link: Link, peer: Pick<SilentPeer, "peer" | "link">): void {
    if (this.closing) return;
    // Still dialing the next stage after a second (a dial that is answered takes milliseconds): the
    // coordinator gave up waiting for this stage's Ready, and the reason it never came is that dial.
    const dialingMs = this.dialingSince === undefined ? 0 : Math.round(performance.now() - this.dialingSince);
    if (dialingMs >= 1_000) this.sayNextUnreachable(`no connection after ${dialingMs} ms of trying`);
    if (link.silence !== undefined) this.options.log.error({ link: which, peer: link.peer, ...link.silence }, `link dead: ${reason}`);
    this.options.log.error({ link: which, reason }, `stage ${this.options.stage}: ${which} broke (${reason}); a pipeline cannot survive the loss of a peer, exiting`);
    // The peers still heard from, for a supervisor weighing another member's word that one of them
    // went silent (a cut between that member and this peer); before the silent line, which is last.
    logAnsweringPeers(
      this.options.log,
      [...this.peerIds].filter(([other]) => other !== link).map(([other, id]) => ({ peer: id, link: other })),
    );
    this.closing = true;
    // The peer is named for the supervisor, last: this process exits because of it. One whose link
    // closed most likely died a moment ago; a silent one may live on.
    if (link.silence === undefined) {
      logLostPeer(this.options.log, { ...peer, reason });
      return this.options.exit(failureExitStatus);
    }
    logSilentPeer(this.options.log, { ...peer, ...link.silence });
    this.options.exit(peerSilentExitStatus);
  }

  private handle(kind: number, payload: Buffer): void {
    // Read before the payload is decoded: one the decoder refuses is still answered for its sequence.
    const seq = kind === Kind.StatsRequest ? -1 : seqOf(payload);
    if (this.options.log.isLevelEnabled("trace")) this.options.log.trace({ kind, seq, t: performance.now() }, "frame");
    try {
      switch (kind) {
        case Kind.Prepare: {
          const m = decodePrepare(payload);
          // A sequence prepared again starts over; its first cache goes back to the arena.
          this.dropSequence(m.seq);
          this.sequences.set(m.seq, { cache: this.model.createCache(), sampler: this.model.last ? new Sampler(m.params) : undefined });
          this.downstream?.send(Kind.Prepare, encodePrepare(m));
          return;
        }
        case Kind.Run: {
          const m = decodeRun(payload);
          if (!this.model.first) throw new Error("run sent to a stage that is not the first");
          this.step(
            m.seq,
            this.compute(() => this.model.embed(m.tokens)),
            m.tokens.length,
            m.fillOnly,
          );
          return;
        }
        case Kind.Activations: {
          const m = decodeActivations(payload);
          if (m.hiddenSize !== this.options.config.hiddenSize) throw new Error(`activations of width ${m.hiddenSize}, expected ${this.options.config.hiddenSize}`);
          this.step(m.seq, m.hidden, m.rows, m.fillOnly);
          return;
        }
        case Kind.Release: {
          decodeSeq(payload);
          this.dropSequence(seq);
          this.downstream?.send(Kind.Release, encodeSeq(seq));
          return;
        }
        case Kind.StatsRequest: {
          const kvBytes = [...this.sequences.values()].reduce((s, q) => s + q.cache.bytes(), 0);
          this.coordinator?.sendJson(Kind.Stats, {
            nodeId: this.options.nodeId,
            stage: this.options.stage,
            range: [this.options.range.start, this.options.range.end],
            threads: this.model.threads,
            stolenChunks: this.model.stolenChunks,
            sharingPauses: this.model.sharingPauses,
            weightBytes: this.model.weightBytes,
            ...residentMemory(),
            rssBeforeLoad: this.rssBeforeLoad,
            rssAfterLoad: this.rssAfterLoad,
            sequences: this.sequences.size,
            kvBytes,
            bytesSentDownstream: this.downstream?.bytesSent ?? 0,
            rowsSentDownstream: this.rowsSent,
          });
          return;
        }
        default:
          this.options.log.warn({ kind }, "unexpected frame kind");
      }
    } catch (error) {
      const message = (error as Error).message;
      // Every stats request is answered, in order: the coordinator pairs answers with requests.
      if (kind === Kind.StatsRequest) {
        this.options.log.warn({ err: message }, "could not compose the stats answer");
        this.coordinator?.sendJson(Kind.Stats, { error: message });
        return;
      }
      this.options.log.warn({ seq, err: message }, "sequence failed");
      if (seq >= 0) {
        this.dropSequence(seq);
        this.coordinator?.send(Kind.Error, encodeError(seq, message));
      }
    }
  }

  private dropSequence(seq: number): void {
    const state = this.sequences.get(seq);
    if (state === undefined) return;
    this.sequences.delete(seq);
    this.model.releaseCache(state.cache);
  }

  /**
   * Run this stage's layers for one message, then pass on activations or the sampled token; a
   * fill-only step (a chunk of a long prompt) is answered by the last stage without sampling.
   */
  private step(seq: number, hidden: Float32Array, rows: number, fillOnly: boolean): void {
    const state = this.sequences.get(seq);
    if (state === undefined) throw new Error(`sequence ${seq} is not prepared on stage ${this.options.stage}`);
    this.compute((progress) => this.model.forward(state.cache, hidden, rows, progress));
    if (!this.model.last) {
      this.rowsSent += rows;
      this.downstream?.send(Kind.Activations, encodeActivations(seq, rows, hidden, this.options.config.hiddenSize, fillOnly));
      return;
    }
    if (fillOnly) {
      this.results?.send(Kind.Result, encodeResult(seq, { token: noToken, logprob: 0, top: [] }));
      return;
    }
    const sampled = this.compute(() => (state.sampler as Sampler).sample(this.model.logits(hidden, rows - 1, this.logits)));
    this.results?.send(Kind.Result, encodeResult(seq, sampled));
  }

  /** Run synchronous compute (it blocks this thread's event loop) with every link heartbeating meanwhile. */
  private compute<T>(work: (progress: () => void) => T): T {
    const started = performance.now();
    const result = this.heartbeat.run([this.coordinator, this.upstream, this.downstream, this.results], work);
    const ms = Math.round(performance.now() - started);
    if (ms >= defaultLiveness.heartbeatMs) this.options.log.debug({ ms }, "long compute: the helper thread kept the links heartbeating");
    // At trace level every computation's end is said, as every frame's taking is: a trace tells
    // whether the process was inside a computation at any moment.
    else if (this.options.log.isLevelEnabled("trace")) this.options.log.trace({ ms }, "compute done");
    return result;
  }
}
