/** Framing (`[kind u8][len u64 BE][payload]`) and message encodings. */
import { describe, expect, it } from "vitest";
import {
  decodeActivations,
  decodeResult,
  decodeSeq,
  encodeActivations,
  encodeFrame,
  encodeResult,
  FrameReader,
  Kind,
  MalformedMessage,
} from "../../src/engine/transport/index.js";

describe("frames", () => {
  it("writes the mlxcel header and parses frames split at any byte", () => {
    const a = encodeFrame(Kind.Run, Buffer.from("hello"));
    expect([...a.subarray(0, 9)]).toEqual([Kind.Run, 0, 0, 0, 0, 0, 0, 0, 5]);
    const stream = Buffer.concat([a, encodeFrame(Kind.Release, Buffer.alloc(0)), encodeFrame(Kind.Result, Buffer.alloc(70000, 7))]);
    for (const step of [1, 3, 9, 4096]) {
      const reader = new FrameReader(1 << 20);
      const frames = [];
      for (let i = 0; i < stream.length; i += step) frames.push(...reader.push(stream.subarray(i, i + step)));
      expect(frames.map((f) => [f.kind, f.payload.length])).toEqual([
        [Kind.Run, 5],
        [Kind.Release, 0],
        [Kind.Result, 70000],
      ]);
      expect(frames[0]!.payload.toString()).toBe("hello");
    }
  });

  it("refuses a frame larger than the limit before reading it", () => {
    const reader = new FrameReader(1024);
    expect(() => reader.push(encodeFrame(Kind.Hello, Buffer.alloc(2048)).subarray(0, 9))).toThrow(/exceeds the limit of 1024/);
  });

  it("activations are f32 with a 12-byte header; results carry the token and log probabilities", () => {
    const hidden = new Float32Array([1.5, -2.25, 3e-8, 4, 5, 6]);
    const payload = encodeActivations(7, 2, hidden, 3);
    expect(payload.length).toBe(12 + 6 * 4);
    const back = decodeActivations(payload);
    expect(back).toMatchObject({ seq: 7, rows: 2, hiddenSize: 3 });
    expect([...back.hidden]).toEqual([...hidden]);
    const result = {
      token: 42,
      logprob: -0.123456789,
      top: [
        { token: 42, logprob: -0.123456789 },
        { token: 3, logprob: -2 },
      ],
    };
    expect(decodeResult(encodeResult(9, result))).toEqual({ seq: 9, result });
  });

  it("a payload whose length disagrees with its header is MalformedMessage, naming both lengths", () => {
    const result = encodeResult(9, { token: 1, logprob: -1, top: [{ token: 1, logprob: -1 }] });
    expect(() => decodeResult(result.subarray(0, result.length - 1))).toThrow(
      new MalformedMessage("malformed result with 1 alternatives message: 28 bytes, expected 29"),
    );
    expect(() => decodeResult(Buffer.alloc(3))).toThrow(/malformed result message: 3 bytes, shorter than its 17-byte header/);
    expect(() => decodeSeq(Buffer.alloc(5))).toThrow(/malformed sequence id message: 5 bytes, expected 4/);
    expect(() => decodeActivations(Buffer.concat([encodeActivations(1, 1, new Float32Array(3), 3), Buffer.alloc(4)]))).toThrow(
      /malformed activations of 1 × 3 message: 28 bytes, expected 24/,
    );
  });
});
