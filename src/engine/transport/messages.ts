/**
 * Binary payloads of the pipeline messages. Everything is little-endian except the frame header.
 * Activations travel as f32, so a token costs hidden_size × 4 bytes + 12 bytes of header per
 * boundary, and every stage computes on exactly the floats the previous one produced.
 */
import type { SampledToken, SamplingParams } from "../model/index.js";

export interface PrepareMessage {
  seq: number;
  params: SamplingParams;
}

export function encodePrepare(m: PrepareMessage): Buffer {
  const b = Buffer.alloc(prepareBytes);
  b.writeUInt32LE(m.seq, 0);
  b.writeDoubleLE(m.params.temperature, 4);
  b.writeDoubleLE(m.params.topP, 12);
  b.writeUInt32LE(m.params.seed >>> 0, 20);
  b.writeUInt8(m.params.topLogprobs, 24);
  b.writeUInt8(m.params.logprobs ? 1 : 0, 25);
  return b;
}

/** Bytes of a Prepare payload. */
const prepareBytes = 26;

export function decodePrepare(b: Buffer): PrepareMessage {
  expectLength("prepare", b, prepareBytes);
  return {
    seq: b.readUInt32LE(0),
    params: { temperature: b.readDoubleLE(4), topP: b.readDoubleLE(12), seed: b.readUInt32LE(20), topLogprobs: b.readUInt8(24), logprobs: b.readUInt8(25) !== 0 },
  };
}

/** `seq`, then the token ids to append to the sequence. */
/**
 * The top bit of a run's token count and of an activations' row count: the step only fills the
 * sequence's caches (a chunk of a long prompt), and the last stage answers it without sampling (a
 * result of `noToken`). No frame comes near 2^31 rows.
 */
const fillOnlyBit = 0x80000000;

/** The token of a result that answers a fill-only step: none was sampled. */
export const noToken = 0xffffffff;

export function encodeRun(seq: number, tokens: readonly number[], fillOnly = false): Buffer {
  const b = Buffer.alloc(8 + 4 * tokens.length);
  b.writeUInt32LE(seq, 0);
  b.writeUInt32LE((tokens.length | (fillOnly ? fillOnlyBit : 0)) >>> 0, 4);
  tokens.forEach((t, i) => b.writeUInt32LE(t, 8 + 4 * i));
  return b;
}

export function decodeRun(b: Buffer): { seq: number; tokens: number[]; fillOnly: boolean } {
  atLeast("run", b, 8);
  const word = b.readUInt32LE(4);
  const count = word & ~fillOnlyBit;
  expectLength(`run of ${count} tokens`, b, 8 + 4 * count);
  // A step computes the logits of its last row: with none, there is none to compute.
  if (count === 0) throw new MalformedMessage("malformed run message: no tokens");
  const tokens: number[] = new Array<number>(count);
  for (let i = 0; i < count; i++) tokens[i] = b.readUInt32LE(8 + 4 * i);
  return { seq: b.readUInt32LE(0), tokens, fillOnly: (word & fillOnlyBit) !== 0 };
}

/** Header bytes of an activations payload (seq, rows, hidden). */
export const activationHeaderBytes = 12;

export function encodeActivations(seq: number, rows: number, hidden: Float32Array, hiddenSize: number, fillOnly = false): Buffer {
  const floats = rows * hiddenSize;
  const b = Buffer.allocUnsafe(activationHeaderBytes + floats * 4);
  b.writeUInt32LE(seq, 0);
  b.writeUInt32LE((rows | (fillOnly ? fillOnlyBit : 0)) >>> 0, 4);
  b.writeUInt32LE(hiddenSize, 8);
  b.set(new Uint8Array(hidden.buffer, hidden.byteOffset, floats * 4), activationHeaderBytes);
  return b;
}

export function decodeActivations(b: Buffer): { seq: number; rows: number; hiddenSize: number; hidden: Float32Array; fillOnly: boolean } {
  atLeast("activations", b, activationHeaderBytes);
  const word = b.readUInt32LE(4);
  const rows = word & ~fillOnlyBit;
  const hiddenSize = b.readUInt32LE(8);
  // Checked before the floats are allocated: the header alone could ask for gigabytes.
  expectLength(`activations of ${rows} × ${hiddenSize}`, b, activationHeaderBytes + rows * hiddenSize * 4);
  if (rows === 0) throw new MalformedMessage("malformed activations message: no rows");
  const hidden = new Float32Array(rows * hiddenSize);
  new Uint8Array(hidden.buffer).set(b.subarray(activationHeaderBytes, activationHeaderBytes + rows * hiddenSize * 4));
  return { seq: b.readUInt32LE(0), rows, hiddenSize, hidden, fillOnly: (word & fillOnlyBit) !== 0 };
}

export function encodeSeq(seq: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32LE(seq, 0);
  return b;
}

export function decodeSeq(b: Buffer): number {
  expectLength("sequence id", b, 4);
  return b.readUInt32LE(0);
}

export function encodeResult(seq: number, r: SampledToken): Buffer {
  const b = Buffer.alloc(4 + 4 + 8 + 1 + r.top.length * 12);
  b.writeUInt32LE(seq, 0);
  b.writeUInt32LE(r.token, 4);
  b.writeDoubleLE(r.logprob, 8);
  b.writeUInt8(r.top.length, 16);
  r.top.forEach((t, i) => {
    b.writeUInt32LE(t.token, 17 + 12 * i);
    b.writeDoubleLE(t.logprob, 21 + 12 * i);
  });
  return b;
}

export function decodeResult(b: Buffer): { seq: number; result: SampledToken } {
  atLeast("result", b, 17);
  const n = b.readUInt8(16);
  expectLength(`result with ${n} alternatives`, b, 17 + 12 * n);
  const top: SampledToken["top"] = [];
  for (let i = 0; i < n; i++) top.push({ token: b.readUInt32LE(17 + 12 * i), logprob: b.readDoubleLE(21 + 12 * i) });
  return { seq: b.readUInt32LE(0), result: { token: b.readUInt32LE(4), logprob: b.readDoubleLE(8), top } };
}

export function encodeError(seq: number, message: string): Buffer {
  return Buffer.concat([encodeSeq(seq), Buffer.from(message, "utf8")]);
}

export function decodeError(b: Buffer): { seq: number; message: string } {
  atLeast("error", b, 4);
  return { seq: b.readUInt32LE(0), message: b.subarray(4).toString("utf8") };
}

/**
 * The sequence a payload names (its first 4 bytes), or -1 when it is too short to name one: a
 * payload the decoders refuse is still answered for its sequence.
 */
export function seqOf(b: Buffer): number {
  return b.length >= 4 ? b.readUInt32LE(0) : -1;
}

/** A payload whose length is not what its kind (and its own header) says: the peer does not speak this protocol. */
export class MalformedMessage extends Error {
  override readonly name = "MalformedMessage";
}

function expectLength(what: string, b: Buffer, bytes: number): void {
  if (b.length !== bytes) throw new MalformedMessage(`malformed ${what} message: ${b.length} bytes, expected ${bytes}`);
}

function atLeast(what: string, b: Buffer, bytes: number): void {
  if (b.length < bytes) throw new MalformedMessage(`malformed ${what} message: ${b.length} bytes, shorter than its ${bytes}-byte header`);
}
