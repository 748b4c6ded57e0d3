/**
 * An authenticated, framed TCP link between two engine processes. `acceptLink` runs the server
 * side of the handshake on an accepted socket, `dialLink` the client side; both resolve to a Link
 * once the handshake is done and no other frame is accepted before that.
 */
import { connect, type Socket } from "node:net";
import { clientMac, createNonce, macEquals, serverMac } from "./auth.js";
import { joinHostPort } from "./host-port.js";
import { encodeFrame, FrameReader, frameHeaderBytes, Kind } from "./frames.js";
import { defaultLiveness, largeHeartbeatBytes, largeHeartbeatDue, type LivenessBounds, unwatch, watch } from "./liveness.js";

/** Largest frame accepted before the handshake completes, bytes. */
const handshakeMaxBytes = 4096;
/** Largest frame accepted on an established link, bytes (a long prompt's activations). */
const linkMaxBytes = 1 << 30;
/** How long a peer has to complete the handshake, ms. */
const handshakeTimeoutMs = 10_000;

/**
 * Who dials: the coordinator (to each stage), the previous stage (to the next), or the last stage
 * (to the coordinator's control address, the link its results travel back on).
 */
export type PeerRole = "coordinator" | "upstream" | "stage";

export interface Hello {
  role: PeerRole;
  nodeId: string;
}

/** How a link ended when its peer went silent. */
export interface Silence {
  /** Time without a byte from the peer when it was declared dead, ms (this process's blocked time excluded). */
  silentMs: number;
  /** The bound, ms. */
  deadAfterMs: number;
}

/** Why a handshake ended: the peer closed before sending one byte (a port probe), or anything else. */
export class HandshakeAbandoned extends Error {
  override readonly name = "HandshakeAbandoned";
}

const noPayload = Buffer.alloc(0);
/** A large heartbeat's payload (liveness.ts): zeros, which the peer reads past as any heartbeat. */
const padding = Buffer.alloc(largeHeartbeatBytes);

export class Link {
  private handler: (kind: number, payload: Buffer) => void = () => {};
  private closeHandler: (reason: string) => void = () => {};
  private closed = false;
  private closeReason = "connection closed";
  /** When a byte was last received / a frame last sent (performance.now(), ms). */
  private lastHeard = performance.now();
  private lastSent = performance.now();
  /** Whether a frame (a heartbeat included) came over the established link: the peer's handshake is over. */
  private heardFrame = false;
  /** When a frame of at least largeHeartbeatBytes was last sent (performance.now(), ms). */
  private lastLargeSent = performance.now();
  private readonly liveness: LivenessBounds;
  /** Set when the link was declared dead for silence. */
  silence: Silence | undefined;
  /** Bytes sent (frame headers included), for the bytes-per-token figure. */
  bytesSent = 0;

  constructor(
    readonly socket: Socket,
    private readonly reader: FrameReader,
    /** Who is at the other end, for log lines. */
    readonly peer: string,
    pending: Array<{ kind: number; payload: Buffer }>,
    liveness: LivenessBounds = defaultLiveness,
  ) {
    this.liveness = liveness;
    socket.setNoDelay(true);
    reader.maxPayloadBytes = linkMaxBytes;
    socket.removeAllListeners("data");
    socket.on("data", (chunk: Buffer) => {
      // Any byte counts, so a peer busy sending one large frame is alive.
      this.lastHeard = performance.now();
      let frames;
      try {
        frames = reader.push(chunk);
      } catch (error) {
        this.fail(`protocol error: ${(error as Error).message}`);
        return;
      }
      if (frames.length > 0) this.heardFrame = true;
      for (const f of frames) if (f.kind !== Kind.Heartbeat) this.handler(f.kind, f.payload);
    });
    socket.on("error", (error) => this.fail(error.message));
    socket.on("close", () => this.fail("connection closed"));
    socket.resume();
    // Frames that arrived in the same chunk as the handshake's last one.
    const early = pending.filter((f) => f.kind !== Kind.Heartbeat);
    if (early.length > 0) setImmediate(() => early.forEach((f) => this.handler(f.kind, f.payload)));
    watch(this);
  }

  onFrame(handler: (kind: number, payload: Buffer) => void): void {
    this.handler = handler;
  }

  onClose(handler: (reason: string) => void): void {
    this.closeHandler = handler;
    if (this.closed) handler(this.closeReason);
  }

  send(kind: number, payload: Uint8Array): void {
    if (this.closed) return;
    // What the pipeline moves (the bytes-per-token figure), not the links' own heartbeats.
    if (kind !== Kind.Heartbeat) this.bytesSent += payload.length + frameHeaderBytes;
    this.lastSent = performance.now();
    if (payload.length >= largeHeartbeatBytes) this.lastLargeSent = this.lastSent;
    this.socket.write(encodeFrame(kind, payload));
  }

  /** Liveness tick (liveness.ts): declare the link dead after too long a silence, else keep it warm. */
  tick(now: number): void {
    if (this.closed) return;
    const silentMs = Math.round(now - this.lastHeard);
    if (silentMs > this.liveness.deadAfterMs) {
      this.silence = { silentMs, deadAfterMs: this.liveness.deadAfterMs };
      this.fail(`no frame from ${this.peer} for ${silentMs} ms (dead after ${this.liveness.deadAfterMs} ms of silence)`);
      return;
    }
    if (now - this.lastSent >= this.liveness.heartbeatMs) this.send(Kind.Heartbeat, this.padsNext(now) ? padding : noPayload);
  }

  /**
   * Whether the next heartbeat is a large one (liveness.ts): when one is due, once the peer has sent
   * a frame over the link (its handshake is over: a handshake's reader takes no frame that large),
   * and while nothing of this link waits in user space (a frame partly written would keep the
   * compute helper from heartbeating this link: see shareableFd).
   */
  private padsNext(now: number): boolean {
    return this.heardFrame && this.socket.writableLength === 0 && largeHeartbeatDue(this.lastLargeSent, now);
  }

  /** Time since a byte last came from the peer, ms (this process's blocked time excluded). */
  heardMsAgo(now = performance.now()): number {
    return Math.round(now - this.lastHeard);
  }

  /** The silence after which this link is declared dead, ms. */
  get deadAfterMs(): number {
    return this.liveness.deadAfterMs;
  }

  /** This process could not read for `ms`: that time is not the peer's silence. */
  creditBlocked(ms: number): void {
    this.lastHeard = Math.min(performance.now(), this.lastHeard + ms);
  }

  /**
   * The socket's descriptor when another thread may write whole frames to it now (nothing of this
   * link is queued in user space), else -1. See compute-heartbeat.ts.
   */
  shareableFd(): number {
    if (this.closed || this.socket.writableLength !== 0) return -1;
    const fd = (this.socket as unknown as { _handle?: { fd?: number } })._handle?.fd;
    return typeof fd === "number" && fd >= 0 ? fd : -1;
  }

  /** Write bytes that are not a frame of their own (the tail of a frame another thread began). */
  writeRaw(bytes: Uint8Array): void {
    if (!this.closed) this.socket.write(bytes);
  }

  sendJson(kind: number, value: unknown): void {
    this.send(kind, Buffer.from(JSON.stringify(value), "utf8"));
  }

  close(): void {
    this.closed = true;
    unwatch(this);
    this.socket.destroy();
  }

  private fail(reason: string): void {
    if (this.closed) return;
    this.closed = true;
    this.closeReason = reason;
    unwatch(this);
    this.socket.destroy();
    this.closeHandler(reason);
  }
}

/** Wait for the next frame during the handshake, with a deadline. */
function readHandshakeFrames(socket: Socket, reader: FrameReader): Promise<Array<{ kind: number; payload: Buffer }>> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => done(new Error(`handshake timed out after ${handshakeTimeoutMs} ms`)), handshakeTimeoutMs);
    const onData = (chunk: Buffer): void => {
      try {
        const frames = reader.push(chunk);
        if (frames.length > 0) done(undefined, frames);
      } catch (error) {
        done(error as Error);
      }
    };
    const onClose = (): void => done(new Error("connection closed during the handshake"));
    const onError = (error: Error): void => done(error);
    const done = (error?: Error, frames?: Array<{ kind: number; payload: Buffer }>): void => {
      clearTimeout(timer);
      // Hold bytes that arrive before the Link (or the next handshake step) listens.
      socket.pause();
      socket.off("data", onData);
      socket.off("close", onClose);
      socket.off("error", onError);
      if (error !== undefined) reject(error);
      else resolve(frames ?? []);
    };
    socket.on("data", onData);
    socket.on("close", onClose);
    socket.on("error", onError);
    socket.resume();
  });
}

function parseJson(payload: Buffer): Record<string, unknown> {
  const value: unknown = JSON.parse(payload.toString("utf8"));
  if (value === null || typeof value !== "object") throw new Error("expected a JSON object");
  return value as Record<string, unknown>;
}

/**
 * Server side: challenge, verify the peer's answer (when a token is configured), welcome.
 * Rejects (and destroys the socket) when the peer does not prove the token.
 */
export async function acceptLink(socket: Socket, nodeId: string, token: Buffer | undefined): Promise<{ link: Link; hello: Hello }> {
  const reader = new FrameReader(handshakeMaxBytes);
  const nonce = createNonce();
  try {
    socket.write(encodeFrame(Kind.Challenge, Buffer.from(JSON.stringify({ nonce, auth: token !== undefined }))));
    const [first, ...rest] = await readHandshakeFrames(socket, reader);
    if (first === undefined || first.kind !== Kind.Hello) throw new Error(`expected a hello frame, got kind ${first?.kind}`);
    const hello = parseJson(first.payload);
    const role = hello.role;
    if (role !== "coordinator" && role !== "upstream" && role !== "stage") throw new Error(`unknown peer role ${JSON.stringify(role)}`);
    const peerId = String(hello.nodeId);
    if (token !== undefined && !macEquals(clientMac(token, nonce, role, peerId), hello.mac)) {
      throw new Error("peer did not prove the transport token");
    }
    const clientNonce = String(hello.clientNonce ?? "");
    const mac = token === undefined ? undefined : serverMac(token, clientNonce, nodeId);
    socket.write(encodeFrame(Kind.Welcome, Buffer.from(JSON.stringify({ nodeId, mac }))));
    return { link: new Link(socket, reader, `${role} ${peerId}`, rest), hello: { role, nodeId: peerId } };
  } catch (error) {
    socket.destroy();
    // A port probe connects and closes (often with a reset, our challenge being unread) before
    // sending anything: not a peer that failed to authenticate.
    const message = (error as Error).message;
    if (socket.bytesRead === 0 && /closed during the handshake|ECONNRESET|EPIPE/.test(message)) {
      throw new HandshakeAbandoned(`connection closed before sending a frame (${message})`, { cause: error });
    }
    throw error;
  }
}

/** Client side: dial, answer the challenge, verify the server's proof. */
export async function dialLink(
  host: string,
  port: number,
  hello: Hello,
  token: Buffer | undefined,
  /** Connect timeout, ms. */
  timeoutMs: number,
): Promise<Link> {
  const socket = await new Promise<Socket>((resolve, reject) => {
    const s = connect({ host, port });
    const timer = setTimeout(() => {
      s.destroy();
      reject(new Error(`connect to ${joinHostPort(host, port)} timed out`));
    }, timeoutMs);
    s.once("connect", () => {
      clearTimeout(timer);
      s.removeAllListeners("error");
      resolve(s);
    });
    s.once("error", (error) => {
      clearTimeout(timer);
      reject(error);
    });
  });
  const reader = new FrameReader(handshakeMaxBytes);
  try {
    const [challengeFrame] = await readHandshakeFrames(socket, reader);
    if (challengeFrame === undefined || challengeFrame.kind !== Kind.Challenge) throw new Error("expected a challenge frame");
    const challenge = parseJson(challengeFrame.payload);
    if (challenge.auth === true && token === undefined) {
      throw new Error(`${joinHostPort(host, port)} requires a transport token (--transport-token-file)`);
    }
    const clientNonce = createNonce();
    const mac = token === undefined ? undefined : clientMac(token, String(challenge.nonce), hello.role, hello.nodeId);
    socket.write(encodeFrame(Kind.Hello, Buffer.from(JSON.stringify({ ...hello, clientNonce, mac }))));
    const [welcomeFrame, ...rest] = await readHandshakeFrames(socket, reader);
    if (welcomeFrame === undefined || welcomeFrame.kind !== Kind.Welcome) throw new Error("expected a welcome frame");
    const welcome = parseJson(welcomeFrame.payload);
    if (token !== undefined && !macEquals(serverMac(token, clientNonce, String(welcome.nodeId)), welcome.mac)) {
      throw new Error(`${joinHostPort(host, port)} did not prove the transport token`);
    }
    return new Link(socket, reader, `${String(welcome.nodeId)} at ${joinHostPort(host, port)}`, rest);
  } catch (error) {
    socket.destroy();
    throw error;
  }
}

/**
 * Dial until `deadline` (performance.now() ms: a clock step does not move it), retrying refused connections every `intervalMs`; the final
 * error names the address that did not answer.
 */
export async function dialLinkUntil(host: string, port: number, hello: Hello, token: Buffer | undefined, deadline: number, intervalMs = 200): Promise<Link> {
  for (;;) {
    try {
      return await dialLink(host, port, hello, token, Math.max(1000, deadline - performance.now()));
    } catch (error) {
      const message = (error as Error).message;
      const retryable = /ECONNREFUSED|ECONNRESET|EHOSTUNREACH|ENETUNREACH|timed out|closed during the handshake/.test(message);
      if (!retryable) throw error;
      if (performance.now() + intervalMs > deadline) throw new Error(`${joinHostPort(host, port)} did not answer before the deadline (${message})`, { cause: error });
      await new Promise((r) => setTimeout(r, intervalMs));
    }
  }
}
