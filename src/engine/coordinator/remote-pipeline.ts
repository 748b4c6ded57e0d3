/**
 * Remote stages over TCP. The coordinator holds one control link per stage: tokens go into stage 0,
 * prepare/release travel down the pipeline in order behind them, errors come back from any stage.
 * Sampled tokens come back from the last stage on the link it dials to the coordinator's control
 * address (control-listener.ts), reported as part of the last stage's link. Losing any link —
 * closed, reset, or silent for longer than the liveness bound (transport/liveness.ts) — is fatal
 * for the whole pipeline: requests in flight fail at once with PipelineBroken and every link's
 * state is reported by `linkStates`.
 */
import { logAnsweringPeers, logLostPeer, logSilentPeer } from "../exit-status.js";
import type { Logger } from "../log.js";
import type { SampledToken, SamplingParams } from "../model/index.js";
import { ComputeHeartbeat, decodeError, decodeResult, dialLinkUntil, encodePrepare, encodeRun, encodeSeq, Kind, type Link, noToken, seqOf } from "../transport/index.js";
import { joinHostPort } from "../transport/host-port.js";
import { listenForResults } from "./control-listener.js";
import type { Pipeline } from "./pipeline.js";

export interface StageAddress {
  nodeId: string;
  host: string;
  port: number;
}

/** One control link as /health reports it. */
export interface LinkState {
  stage: number;
  nodeId: string;
  address: string;
  state: "up" | "dead";
  /** Why it died. */
  reason?: string;
  /** Time the stage was silent before it was declared dead, ms. */
  silentMs?: number;
}

/** A request failed because the pipeline lost a stage link. */
export class PipelineBroken extends Error {
  override readonly name = "PipelineBroken";
}

interface Pending {
  resolve: (r: SampledToken) => void;
  reject: (e: Error) => void;
  /** A fill-only step, answered without a token; a run is answered with one. */
  fill: boolean;
}

export class RemotePipeline implements Pipeline {
  private readonly pending = new Map<number, Pending>();
  /** Per stage, the callers waiting for its stats answer, oldest first (answers come in order). */
  private statsWaiters: Array<Array<(v: object) => void>> = [];
  private broken: string | undefined;
  private readonly states: LinkState[];
  /** Writes the links' heartbeats from a helper thread while `hold` keeps the event loop busy. */
  private readonly heartbeat = new ComputeHeartbeat();

  private constructor(
    private readonly links: Link[],
    /** The last stage's link to the control address: its results. */
    private readonly results: Link,
    private readonly closeControl: () => void,
    stages: StageAddress[],
    private readonly log: Logger,
    private readonly onBroken: (reason: string) => void,
  ) {
    this.states = stages.map((s, stage) => ({ stage, nodeId: s.nodeId, address: joinHostPort(s.host, s.port), state: "up" }));
    links.forEach((link, i) => {
      link.onClose((reason) => this.lose(i, link, reason));
      link.onFrame((kind, payload) => this.handle(i, kind, payload));
    });
    const last = links.length - 1;
    results.onClose((reason) => this.lose(last, results, reason));
    results.onFrame((kind, payload) => this.handle(last, kind, payload));
  }

  /** Every stage link's state, in stage order. */
  linkStates(): LinkState[] {
    return this.states.map((s) => ({ ...s }));
  }

  /**
   * Bind the control address, connect to every stage in order (each retried until `deadline`,
   * epoch ms) and wait until each reports ready (its downstream link is up; the last stage's, to
   * the control address).
   */
  static async connect(
    stages: StageAddress[],
    control: { host: string; port: number },
    nodeId: string,
    token: Buffer | undefined,
    deadline: number,
    log: Logger,
    onBroken: (reason: string) => void,
  ): Promise<RemotePipeline> {
    const lastStage = stages[stages.length - 1] as StageAddress;
    const listener = await listenForResults(control, nodeId, lastStage.nodeId, token, log);
    const links: Link[] = [];
    const readies: Array<Promise<void>> = [];
    let results: Link;
    try {
      for (const s of stages) {
        const link = await dialLinkUntil(s.host, s.port, { role: "coordinator", nodeId }, token, deadline);
        log.info({ stage: s.nodeId, address: joinHostPort(s.host, s.port) }, "connected to stage");
        links.push(link);
        readies.push(
          new Promise<void>((resolve, reject) => {
            const timer = setTimeout(
              () => reject(new Error(`stage ${s.nodeId} (${joinHostPort(s.host, s.port)}) did not report ready before the deadline`)),
              Math.max(0, deadline - performance.now()),
            );
            link.onFrame((kind) => {
              if (kind === Kind.Ready) {
                clearTimeout(timer);
                resolve();
              }
            });
            link.onClose((reason) => {
              clearTimeout(timer);
              reject(new Error(`stage ${s.nodeId} (${joinHostPort(s.host, s.port)}) closed the link before it was ready: ${reason}`));
            });
          }),
        );
      }
      await Promise.all(readies);
      // The last stage dials the control address before it says ready: its link is here or coming.
      results = await Promise.race([
        listener.results,
        new Promise<never>((_, reject) =>
          setTimeout(
            () => reject(new Error(`the last stage did not connect to the control address ${joinHostPort(control.host, control.port)} before the deadline`)),
            Math.max(0, deadline - performance.now()),
          ).unref(),
        ),
      ]);
    } catch (error) {
      for (const l of links) l.close();
      void listener.results.then((l) => l.close());
      listener.close();
      throw error;
    }
    return new RemotePipeline(links, results, () => listener.close(), stages, log, onBroken);
  }

  prepare(seq: number, params: SamplingParams): void {
    // A broken pipeline takes no new sequence; the run() that follows is rejected with the reason.
    if (this.broken !== undefined) return;
    this.first().send(Kind.Prepare, encodePrepare({ seq, params }));
  }

  run(seq: number, tokens: readonly number[]): Promise<SampledToken> {
    return this.step(seq, tokens, false);
  }

  async fill(seq: number, tokens: readonly number[]): Promise<void> {
    await this.step(seq, tokens, true);
  }

  /** Send a step to the first stage; the last one's result (a sampled token, or none for a fill) settles it. */
  private step(seq: number, tokens: readonly number[], fillOnly: boolean): Promise<SampledToken> {
    if (this.broken !== undefined) return Promise.reject(new PipelineBroken(this.broken));
    return new Promise<SampledToken>((resolve, reject) => {
      this.pending.set(seq, { resolve, reject, fill: fillOnly });
      this.first().send(Kind.Run, encodeRun(seq, tokens, fillOnly));
    });
  }

  release(seq: number): void {
    const p = this.pending.get(seq);
    this.pending.delete(seq);
    p?.reject(new Error("sequence cancelled"));
    if (this.broken === undefined) this.first().send(Kind.Release, encodeSeq(seq));
  }

  async stats(): Promise<object[]> {
    if (this.broken !== undefined) throw new PipelineBroken(this.broken);
    // Each request gets one answer, in order: a waiter that gave up still takes its late answer
    // (else every later one would go to the waiter before it), and a stage that could not compose
    // its figures answers `{"error": …}` rather than nothing.
    const answers = this.links.map(
      (_, i) =>
        new Promise<object>((resolve, reject) => {
          let expired = false;
          const timer = setTimeout(() => {
            expired = true;
            reject(new Error(`stage ${i} did not answer a stats request within 5 s`));
          }, 5_000);
          (this.statsWaiters[i] ??= []).push((value) => {
            clearTimeout(timer);
            if (expired) return;
            const error = typeof value === "object" && value !== null ? (value as { error?: unknown }).error : "an answer that is not an object";
            if (typeof error === "string") reject(new Error(`stage ${i} could not give its figures: ${error}`));
            else resolve(value);
          });
        }),
    );
    for (const link of this.links) link.send(Kind.StatsRequest, Buffer.alloc(0));
    return Promise.all(answers);
  }

  hold<T>(work: () => T): T {
    return this.heartbeat.run([...this.links, this.results], () => work());
  }

  close(): void {
    this.broken ??= "closed";
    for (const l of [...this.links, this.results]) l.close();
    this.heartbeat.stop();
    this.closeControl();
  }

  private first(): Link {
    return this.links[0] as Link;
  }

  private handle(stage: number, kind: number, payload: Buffer): void {
    try {
      this.route(stage, kind, payload);
    } catch (error) {
      // A payload the decoders refuse fails its sequence (when it names one), not this process:
      // the throw would otherwise leave the socket's data handler uncaught.
      const message = (error as Error).message;
      this.log.error({ stage, kind, err: message }, "malformed frame from a stage");
      const seq = seqOf(payload);
      const p = this.pending.get(seq);
      this.pending.delete(seq);
      p?.reject(new Error(`stage ${stage}: ${message}`));
    }
  }

  private route(stage: number, kind: number, payload: Buffer): void {
    switch (kind) {
      case Kind.Result: {
        const { seq, result } = decodeResult(payload);
        const p = this.pending.get(seq);
        this.pending.delete(seq);
        // A run answered as a fill, or a fill with a token: the last stage reads the frames otherwise.
        if (p !== undefined && p.fill !== (result.token === noToken))
          p.reject(new Error(`the last stage answered a ${p.fill ? "fill" : "run"} as a ${p.fill ? "run" : "fill"}: it runs another version of shard-engine`));
        else p?.resolve(result);
        return;
      }
      case Kind.Error: {
        const { seq, message } = decodeError(payload);
        const p = this.pending.get(seq);
        this.pending.delete(seq);
        p?.reject(new Error(`stage ${stage}: ${message}`));
        return;
      }
      case Kind.Stats: {
        const waiter = this.statsWaiters[stage]?.shift();
        if (waiter !== undefined) waiter(JSON.parse(payload.toString("utf8")) as object);
        return;
      }
      default:
        this.log.warn({ stage, kind }, "unexpected frame from a stage");
    }
  }

  private lose(stage: number, link: Link, reason: string): void {
    const state = this.states[stage] as LinkState;
    if (this.broken === "closed") return;
    state.state = "dead";
    state.reason = reason;
    if (link.silence !== undefined) {
      state.silentMs = link.silence.silentMs;
      this.log.error({ stage, peer: link.peer, ...link.silence }, `link dead: ${reason}`);
      logSilentPeer(this.log, { peer: state.nodeId, link: "stage", ...link.silence });
    } else if (this.broken === undefined) {
      // Only the link that breaks the pipeline: the others close after it, as their stages exit.
      logLostPeer(this.log, { peer: state.nodeId, link: "stage", reason });
    }
    this.fail(`link to stage ${stage} (${link.peer}) broke: ${reason}`);
  }

  private fail(reason: string): void {
    if (this.broken !== undefined) return;
    this.broken = reason;
    this.logAnswering();
    for (const p of this.pending.values()) p.reject(new PipelineBroken(reason));
    this.pending.clear();
    this.onBroken(reason);
  }

  /** Name the stages still heard from as the pipeline breaks (the links up, heard lately). */
  private logAnswering(): void {
    const up = this.links.flatMap((link, i) => {
      const state = this.states[i] as LinkState;
      return state.state === "up" ? [{ peer: state.nodeId, link }] : [];
    });
    logAnsweringPeers(this.log, up);
  }
}
