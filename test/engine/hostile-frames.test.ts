/**
 * Frames whose payload disagrees with its own header, sent by a peer that passed the handshake (it
 * has the token, or none is configured) to a real stage process: each is answered with an Error for
 * the sequence it names, nothing is computed on bytes that never arrived, nothing is allocated from
 * the header alone, and the stage keeps serving (its token comes back on the link it dials to the
 * coordinator's control address, which the test plays too).
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { makeTestModel } from "../../src/planner/test-model/index.js";
import { acceptLink, decodeError, decodeResult, dialLink, encodeActivations, encodePrepare, Kind, type Link } from "../../src/engine/transport/index.js";
import { killAll, requireBuild, spawnEngine, waitListening, writeClusterToml, type EngineProcess } from "./support.js";

const hidden = 64;
const token = "hostile-frames-token";
let dir: string;
let stage: EngineProcess;
let link: Link;
/** The coordinator's control address, which the stage dials with its results, and that link. */
let control: Server | undefined;
let results: Link | undefined;
/** Frames the stage sent back, in order. */
const received: Array<{ kind: number; payload: Buffer }> = [];

beforeAll(async () => {
  requireBuild();
  dir = await mkdtemp(join(tmpdir(), "engine-hostile-frames-"));
  await makeTestModel(join(dir, "m"), { layers: 2, hidden, seed: 3 });
  const tokenFile = join(dir, "token");
  await writeFile(tokenFile, token);
  // The last of two stages, alone: it is ready as soon as a coordinator connects and it has dialed
  // the coordinator's control address (no next stage to dial).
  const layout = await writeClusterToml({
    stages: [
      [0, 1],
      [1, 2],
    ],
    dir,
  });
  // Played here as the coordinator plays it: the stage dials it before it says ready.
  control = createServer((socket) => {
    acceptLink(socket, "coordinator", Buffer.from(token)).then(
      ({ link: dialed }) => {
        results = dialed;
        dialed.onFrame((kind, payload) => received.push({ kind, payload }));
      },
      () => undefined,
    );
  });
  await new Promise<void>((resolve) => control!.listen(layout.coordinator.port, layout.coordinator.host, resolve));
  stage = spawnEngine(["-m", join(dir, "m"), "--distributed-config", layout.file, "--node-id", "stage-1", "--no-warmup", "--transport-token-file", tokenFile]);
  const address = layout.stages[1]!;
  await waitListening(address, stage);
  link = await dialLink(address.host, address.port, { role: "coordinator", nodeId: "coordinator" }, Buffer.from(token), 5000);
  link.onFrame((kind, payload) => received.push({ kind, payload }));
  await nextFrame();
});
afterAll(async () => {
  link?.close();
  results?.close();
  control?.close();
  await killAll();
  await rm(dir, { recursive: true, force: true });
});

/** The next frame the stage sends (waiting up to 10 s). */
async function nextFrame(): Promise<{ kind: number; payload: Buffer }> {
  const deadline = Date.now() + 10_000;
  while (received.length === 0) {
    if (stage.child.exitCode !== null) throw new Error(`the stage exited (${stage.child.exitCode}):\n${stage.stderr()}`);
    if (Date.now() > deadline) throw new Error(`no frame from the stage in 10 s:\n${stage.stderr()}`);
    await new Promise((r) => setTimeout(r, 20));
  }
  return received.shift()!;
}

/** Send, then the stage's answer, which must be an Error for `seq`: its message. */
async function errorFor(seq: number, kind: number, payload: Buffer): Promise<string> {
  link.send(kind, payload);
  const answer = await nextFrame();
  expect(answer.kind, `answer to kind ${kind}: ${answer.payload.toString("utf8")}`).toBe(Kind.Error);
  const { seq: answered, message } = decodeError(answer.payload);
  expect(answered).toBe(seq);
  return message;
}

function prepare(seq: number): void {
  link.send(Kind.Prepare, encodePrepare({ seq, params: { temperature: 0, topP: 1, seed: 1, logprobs: false, topLogprobs: 0 } }));
}

/** An activations payload whose header says `rows` rows of `hidden`, carrying `sentRows` of them. */
function activations(seq: number, rows: number, sentRows: number): Buffer {
  const payload = encodeActivations(seq, sentRows, new Float32Array(sentRows * hidden).fill(0.5), hidden);
  payload.writeUInt32LE(rows, 4);
  return payload;
}

describe("a stage given payloads that disagree with their headers", () => {
  it("activations saying 3 rows and carrying 1: an Error for the sequence, not a token computed on 2 rows of zeros", async () => {
    prepare(1);
    expect(await errorFor(1, Kind.Activations, activations(1, 3, 1))).toBe(
      `malformed activations of 3 × ${hidden} message: ${12 + hidden * 4} bytes, expected ${12 + 3 * hidden * 4}`,
    );
  });

  it("activations saying 1,000,000 rows in a 12-byte payload: refused from the header, before anything is allocated", async () => {
    prepare(2);
    expect(await errorFor(2, Kind.Activations, activations(2, 1_000_000, 0))).toBe(
      `malformed activations of 1000000 × ${hidden} message: 12 bytes, expected ${12 + 1_000_000 * hidden * 4}`,
    );
  });

  it("a run of 5 tokens carrying 2: an Error for its sequence (a payload the decoder refused used to go unanswered)", async () => {
    const run = Buffer.alloc(8 + 2 * 4);
    run.writeUInt32LE(3, 0);
    run.writeUInt32LE(5, 4);
    expect(await errorFor(3, Kind.Run, run)).toBe("malformed run of 5 tokens message: 16 bytes, expected 28");
  });

  it("a run of no tokens, or activations of no rows: an Error for the sequence, not a token sampled from row -1", async () => {
    prepare(7);
    expect(await errorFor(7, Kind.Activations, activations(7, 0, 0))).toBe("malformed activations message: no rows");
    const run = Buffer.alloc(8);
    run.writeUInt32LE(6, 0);
    expect(await errorFor(6, Kind.Run, run)).toBe("malformed run message: no tokens");
  });

  it("a prepare one byte short: an Error for its sequence", async () => {
    expect(
      await errorFor(4, Kind.Prepare, encodePrepare({ seq: 4, params: { temperature: 0, topP: 1, seed: 1, logprobs: false, topLogprobs: 0 } }).subarray(0, 25)),
    ).toBe("malformed prepare message: 25 bytes, expected 26");
  });

  it("keeps serving: a well-formed sequence gets its token", async () => {
    prepare(5);
    link.send(Kind.Activations, activations(5, 2, 2));
    const answer = await nextFrame();
    expect(answer.kind).toBe(Kind.Result);
    expect(decodeResult(answer.payload).seq).toBe(5);
    expect(stage.child.exitCode).toBeNull();
  });
});
