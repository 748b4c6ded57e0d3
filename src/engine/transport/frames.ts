/** mlxcel-style frames on a byte stream: `[kind u8][len u64 BE][payload]`. */

export const frameHeaderBytes = 9;

/** Frame kinds of the engine protocol. */
export const Kind = {
  /** Server → client on accept: JSON `{nonce, auth}`. */
  Challenge: 1,
  /** Client → server: JSON `{role, nodeId, clientNonce, mac?}`. */
  Hello: 2,
  /** Server → client: JSON `{nodeId, mac?}`; the link is up. */
  Welcome: 3,
  /** Stage → coordinator: JSON, the stage and its downstream link are ready. */
  Ready: 10,
  /** Down the pipeline: create a sequence (binary, see messages.ts). */
  Prepare: 11,
  /** Coordinator → first stage: token ids to run. */
  Run: 12,
  /** Stage → next stage: hidden states. */
  Activations: 13,
  /** Down the pipeline: drop a sequence and its KV cache. */
  Release: 14,
  /** Last stage → coordinator: the sampled token. */
  Result: 15,
  /** Any stage → coordinator: a sequence failed. */
  Error: 16,
  /** Coordinator → stage: report memory figures. */
  StatsRequest: 17,
  /** Stage → coordinator: JSON memory figures. */
  Stats: 18,
  /**
   * Either direction, empty payload: "I am alive". Sent on a link that has been idle for the
   * heartbeat interval (and by a helper thread while the main thread computes); only accepted on
   * an established link, like every message after the handshake. See liveness.ts.
   */
  Heartbeat: 19,
} as const;

export function encodeFrame(kind: number, payload: Uint8Array): Buffer {
  const frame = Buffer.allocUnsafe(frameHeaderBytes + payload.length);
  frame.writeUInt8(kind, 0);
  frame.writeBigUInt64BE(BigInt(payload.length), 1);
  frame.set(payload, frameHeaderBytes);
  return frame;
}

/** Incremental frame parser; refuses frames larger than `maxPayloadBytes`. */
export class FrameReader {
  private chunks: Buffer[] = [];
  private buffered = 0;

  constructor(public maxPayloadBytes: number) {}

  /** Feed bytes; returns every complete frame. Throws on an oversized frame. */
  push(chunk: Buffer): Array<{ kind: number; payload: Buffer }> {
    this.chunks.push(chunk);
    this.buffered += chunk.length;
    const frames: Array<{ kind: number; payload: Buffer }> = [];
    while (this.buffered >= frameHeaderBytes) {
      const head = this.peek(frameHeaderBytes);
      const length = head.readBigUInt64BE(1);
      if (length > BigInt(this.maxPayloadBytes)) throw new Error(`frame of ${length} bytes exceeds the limit of ${this.maxPayloadBytes}`);
      const total = frameHeaderBytes + Number(length);
      if (this.buffered < total) break;
      const all = this.take(total);
      frames.push({ kind: all.readUInt8(0), payload: all.subarray(frameHeaderBytes) });
    }
    return frames;
  }

  private peek(n: number): Buffer {
    const first = this.chunks[0] as Buffer;
    if (first.length >= n) return first;
    const joined = Buffer.concat(this.chunks);
    this.chunks = [joined];
    return joined;
  }

  private take(n: number): Buffer {
    // peek() leaves at least n bytes in the first chunk.
    const first = this.peek(n);
    const out = first.subarray(0, n);
    if (first.length === n) this.chunks.shift();
    else this.chunks[0] = first.subarray(n);
    this.buffered -= n;
    return out;
  }
}
