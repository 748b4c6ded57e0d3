/**
 * Link liveness on real sockets and real engine processes: an established link heartbeats when
 * idle and declares a silent peer dead within the bound (500 ms heartbeats, dead after 2500 ms of
 * silence); a stopped stage (SIGSTOP: its sockets stay open, nothing answers) turns the
 * coordinator's /health to 503 naming the link within 3 s, fails the request in flight at once and
 * its peers exit 69 naming it (it exits 1 once continued); an idle pipeline sees no link death; port probes are not logged as refused peers.
 * A stage busy for seconds on a prefill is not declared dead, but one whose computation stops moving
 * (its main thread stopped mid-prefill while its heartbeat helper thread runs on, as in a deadlock)
 * is, once it has finished no layer for --compute-stall-ms.
 */
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { connect, createServer, type Server, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { monitorEventLoopDelay } from "node:perf_hooks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { referenceFacts } from "../../src/engines/reference/facts.js";
import { makeTestModel } from "../../src/planner/test-model/index.js";
import { acceptLink, dialLink, encodeFrame, FrameReader, HandshakeAbandoned, Kind } from "../../src/engine/transport/index.js";
import { freePort, killAll, nextHost, requireBuild, startCluster } from "./support.js";

const freezeThread = join(import.meta.dirname, "../support/freeze-thread.py");

let dir: string;
let modelDir: string;
let bigModel: Promise<string> | undefined;

/** The model of the long-compute tests (hidden 512: a prompt of 1500 tokens takes seconds), made once for the file. */
function bigModelDir(): Promise<string> {
  bigModel ??= (async () => {
    const bigDir = join(dir, "big");
    await makeTestModel(bigDir, { layers: 4, hidden: 512, heads: 8, kvHeads: 8, intermediate: 2048, seed: 3 });
    return bigDir;
  })();
  return bigModel;
}

beforeAll(async () => {
  requireBuild();
  dir = await mkdtemp(join(tmpdir(), "engine-heartbeat-"));
  modelDir = join(dir, "m");
  await makeTestModel(modelDir, { layers: 4, hidden: 64, seed: 5 });
});
afterAll(async () => {
  await killAll();
  await rm(dir, { recursive: true, force: true });
});

/**
 * A hand-written peer that answers the handshake (no token) and then only records the frames it
 * receives: it never sends another byte, like a partitioned host.
 */
async function silentServer(host: string): Promise<{ server: Server; port: number; frames: number[]; sockets: Socket[] }> {
  const frames: number[] = [];
  const sockets: Socket[] = [];
  const server = createServer((socket) => {
    sockets.push(socket);
    const reader = new FrameReader(1 << 20);
    socket.write(encodeFrame(Kind.Challenge, Buffer.from(JSON.stringify({ nonce: "00", auth: false }))));
    socket.on("data", (chunk: Buffer) => {
      for (const f of reader.push(chunk)) {
        frames.push(f.kind);
        if (f.kind === Kind.Hello) socket.write(encodeFrame(Kind.Welcome, Buffer.from(JSON.stringify({ nodeId: "silent" }))));
      }
    });
    socket.on("error", () => undefined);
  });
  const port = await freePort(host);
  await new Promise<void>((resolve) => server.listen(port, host, resolve));
  return { server, port, frames, sockets };
}

async function waitFor(check: () => Promise<boolean> | boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`${what}: not met in ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

describe("link liveness (transport)", () => {
  it("an idle link sends heartbeats, and a peer that goes silent is declared dead within the bound", async () => {
    const host = await nextHost();
    const peer = await silentServer(host);
    const link = await dialLink(host, peer.port, { role: "coordinator", nodeId: "c" }, undefined, 2000);
    const started = performance.now();
    // The link's tick is a timer of this process: a busy machine that runs this process's timers
    // late delays the finding by as much, which is the machine's doing, not the bound's.
    const lateness = monitorEventLoopDelay({ resolution: 10 });
    lateness.enable();
    const closed = new Promise<{ reason: string; ms: number }>((resolve) => link.onClose((reason) => resolve({ reason, ms: performance.now() - started })));
    const { reason, ms } = await closed;
    lateness.disable();
    // The silent peer never sent a heartbeat back: dead after 2500 ms of silence, found by a 100 ms tick.
    expect(ms).toBeGreaterThanOrEqual(2400);
    expect(ms).toBeLessThan(3000 + lateness.max / 1e6);
    expect(reason).toMatch(/no frame from silent at .* for \d+ ms \(dead after 2500 ms of silence\)/);
    expect(link.silence?.deadAfterMs).toBe(2500);
    expect(link.silence!.silentMs).toBeGreaterThan(2500);
    // Meanwhile our side kept the idle link warm: a heartbeat about every 500 ms.
    const heartbeats = peer.frames.filter((k) => k === Kind.Heartbeat).length;
    expect(heartbeats).toBeGreaterThanOrEqual(4);
    expect(heartbeats).toBeLessThanOrEqual(6);
    peer.server.close();
  });

  it("a connection that closes before sending a byte is a probe, not a refused peer", async () => {
    const host = await nextHost();
    const port = await freePort(host);
    const outcomes: Array<Promise<unknown>> = [];
    const server = createServer((socket) => outcomes.push(acceptLink(socket, "stage", Buffer.from("t")).catch((e: unknown) => e)));
    await new Promise<void>((resolve) => server.listen(port, host, resolve));
    // A probe like the daemon's (connect, then destroy) and a peer that speaks garbage.
    await new Promise<void>((resolve) => {
      const s = connect(port, host, () => {
        s.destroy();
        resolve();
      });
    });
    await new Promise<void>((resolve) => {
      const s = connect(port, host, () => s.write(encodeFrame(Kind.Run, Buffer.alloc(4))));
      s.resume();
      s.on("error", () => undefined);
      s.on("close", () => resolve());
    });
    await waitFor(() => outcomes.length === 2, 2000, "both connections handled");
    const [probe, garbage] = await Promise.all(outcomes);
    expect(probe).toBeInstanceOf(HandshakeAbandoned);
    expect(garbage).not.toBeInstanceOf(HandshakeAbandoned);
    expect((garbage as Error).message).toMatch(/expected a hello frame/);
    server.close();
  });
});

describe("link liveness (engine processes)", () => {
  it("a stopped stage: health 503 naming the link within 3 s, the request in flight fails at once, its peers exit 69 naming it", async () => {
    const cluster = await startCluster(modelDir, { stages: 2, dir });
    const response = await fetch(`${cluster.baseUrl}/v1/completions`, {
      method: "POST",
      body: JSON.stringify({ prompt: "go", max_tokens: 5000, stream: true, temperature: 0 }),
    });
    const reader = response.body!.getReader();
    let text = "";
    while (text.split("\n\n").filter((e) => e.startsWith("data: ")).length < 3) text += Buffer.from((await reader.read()).value!).toString("utf8");
    const stopped = cluster.stages[1]!;
    stopped.child.kill("SIGSTOP");
    const stoppedAt = performance.now();
    // The stream ends with an error event as soon as the link is declared dead.
    const streamDone = (async () => {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return performance.now() - stoppedAt;
        text += Buffer.from(value).toString("utf8");
      }
    })();
    // Stage 0 finds its silent downstream dead at the same moment and exits, so the coordinator may
    // see stage 0's link close first; either way, within 3 s /health is 503 and names stage 1.
    let healthMs = 0;
    let body = "";
    let health = {
      error: { code: 0, message: "" },
      deadLinks: [] as string[],
      links: [] as Array<{ nodeId: string; state: string; reason?: string; silentMs?: number }>,
    };
    await waitFor(
      async () => {
        const r = await fetch(`${cluster.baseUrl}/health`);
        healthMs = performance.now() - stoppedAt;
        if (r.status !== 503) return false;
        body = await r.text();
        health = JSON.parse(body) as typeof health;
        return health.deadLinks.includes("stage-1");
      },
      4000,
      "health 503 naming stage-1",
    );
    expect(healthMs).toBeLessThan(3200);
    expect(healthMs).toBeGreaterThan(2000);
    expect(health.error.code).toBe(503);
    // The daemon's health reads this 503 as a broken pipeline in the engine's words, not as loading.
    expect(referenceFacts.readiness.brokenIn(body)).toBe(health.error.message);
    expect(health.error.message).toMatch(/^(Stage link\(s\) dead|Pipeline broken): /);
    const silent = health.links.find((l) => l.nodeId === "stage-1")!;
    expect(silent.state).toBe("dead");
    expect(silent.silentMs).toBeGreaterThan(2500);
    // Stage 1's link to the coordinator is the one it dialed (the coordinator names it "stage stage-1")
    // or the one the coordinator dialed ("stage-1 at host:port"): either may be found silent first.
    expect(silent.reason).toMatch(/no frame from (stage-1 at .*|stage stage-1) for \d+ ms \(dead after 2500 ms of silence\)/);
    expect(await streamDone).toBeLessThan(3200);
    expect(text).toMatch(/"code":"pipeline_broken"/);
    expect(text).toMatch(/Pipeline broken: link to stage \d/);
    // A new request is refused with 503 while the coordinator drains.
    const late = await fetch(`${cluster.baseUrl}/v1/completions`, { method: "POST", body: JSON.stringify({ prompt: "x", max_tokens: 1 }) });
    expect(late.status).toBe(503);
    // Every peer of the silent stage names it in a "peer silent" line (a stage as its last) and exits 69: the supervisor's evidence of who hung.
    expect(await cluster.coordinator.exited).toBe(69);
    expect(cluster.coordinator.stderr()).toMatch(/"stage":1,.*"silentMs":\d+,"deadAfterMs":2500,"msg":"link dead: no frame from (stage-1|stage stage-1)/);
    expect(cluster.coordinator.stderr()).toMatch(/"peer":"stage-1","link":"stage","silentMs":\d+,"deadAfterMs":2500,"msg":"peer silent"/);
    // Stage 0 lost its silent downstream the same way.
    expect(await cluster.stages[0]!.exited).toBe(69);
    expect(cluster.stages[0]!.stderr()).toMatch(/"msg":"link dead: no frame from stage-1 at [^"]* for \d+ ms/);
    expect(lastLine(cluster.stages[0]!.stderr())).toMatch(/"peer":"stage-1","link":"downstream","silentMs":\d+,"deadAfterMs":2500,"msg":"peer silent"/);
    // Each says which peers it still heard as its pipeline broke, never the stopped stage (the
    // coordinator may see stage 0's link close first, and then has no peer left to name).
    expect(cluster.stages[0]!.stderr()).toMatch(/"peer":"coordinator","heardMsAgo":\d+,"msg":"peer answering"/);
    for (const p of [cluster.coordinator, cluster.stages[0]!]) expect(p.stderr()).not.toMatch(/"peer":"stage-1","heardMsAgo":\d+,"msg":"peer answering"/);
    // Woken up, the stopped stage finds its links gone and exits 1 (its own stop is not counted as
    // silence, so it names nobody).
    stopped.child.kill("SIGCONT");
    expect(await stopped.exited).toBe(1);
    expect(stopped.stderr()).not.toMatch(/peer silent/);
    // However the closed links show first: an end of stream, a reset on read, or a broken pipe on write.
    expect(stopped.stderr()).toMatch(/broke \((connection closed|read ECONNRESET|write EPIPE)\)/);
    expect(stopped.stderr()).not.toMatch(/link dead/);
  });

  it("an idle two-stage pipeline probed like the daemon does: no link death, no refused-peer warning", async () => {
    const cluster = await startCluster(modelDir, { stages: 2, dir });
    // Probed for 5 s: the links idle for two dead bounds (2.5 s) and more.
    const until = Date.now() + 5_000;
    let probes = 0;
    while (Date.now() < until) {
      const r = await fetch(`${cluster.baseUrl}/health`);
      expect(r.status).toBe(200);
      for (const a of cluster.stageAddresses) {
        await new Promise<void>((resolve) => {
          const s = connect(a.port, a.host, () => {
            s.destroy();
            probes++;
            resolve();
          });
          s.on("error", () => resolve());
        });
      }
      await new Promise((r) => setTimeout(r, 400));
    }
    expect(probes).toBeGreaterThan(15);
    const completion = await fetch(`${cluster.baseUrl}/v1/completions`, { method: "POST", body: JSON.stringify({ prompt: "still", max_tokens: 2 }) });
    expect(completion.status).toBe(200);
    for (const p of [cluster.coordinator, ...cluster.stages]) {
      expect(p.stderr()).not.toMatch(/link dead|broke|pipeline broken/);
      expect(p.stderr()).not.toMatch(/peer refused/);
    }
    await cluster.stop();
  }, 20_000);
});

describe("link liveness during a long compute", () => {
  it("a stage busy for seconds on a prefill (event loop blocked) is not declared dead, even with a stall bound shorter than the prefill", async () => {
    // Wide enough that one chunk of a prompt (512 rows) over three layers takes stage 1 over 3 s on
    // one thread here: a computation blocks the stage for a chunk at a time, and a narrower model
    // needed prompts of thousands of tokens, whose attention grows each chunk, to block it that long.
    const wideDir = join(dir, "wide");
    await makeTestModel(wideDir, { layers: 4, hidden: 1024, heads: 16, kvHeads: 16, intermediate: 5632, seed: 3 });
    const cluster = await startWithDebugLogs(wideDir, {
      stages: [
        [0, 1],
        [1, 4],
      ],
      dir,
      // The bound is on a computation that stops moving, not on a long one: every layer of every
      // chunk of rows counts as progress. One thread: the same seconds blocked for half the CPU.
      stageArgs: ["--compute-stall-ms", "1000", "--threads", "1"],
    });
    // Stage 1 runs three of the four layers over each chunk of the prompt in one synchronous pass.
    // The test only means something if the stage really was blocked longer than the dead bound
    // (2.5 s): how long a chunk takes depends on the machine, so a prompt that computed too quickly
    // is followed by a longer one, scaled by what the last one took (the model's context is 8192).
    const bound = 2600;
    let length = 500;
    let longest = 0;
    for (let attempt = 0; attempt < 4 && longest <= bound; attempt++) {
      const prompt = Array.from({ length }, (_, i) => 5 + (i % 250));
      const r = await fetch(`${cluster.baseUrl}/v1/completions`, { method: "POST", body: JSON.stringify({ prompt, max_tokens: 2, temperature: 0 }) });
      expect(r.status).toBe(200);
      const computes = [...cluster.stages[1]!.stderr().matchAll(/"ms":(\d+),"msg":"long compute/g)].map((m) => Number(m[1]));
      longest = Math.max(0, ...computes);
      length = Math.min(8000, Math.ceil(length * Math.max(1.5, (bound * 1.4) / Math.max(longest, 1))));
    }
    expect(longest).toBeGreaterThan(bound);
    expect((await fetch(`${cluster.baseUrl}/health`)).status).toBe(200);
    for (const p of [cluster.coordinator, ...cluster.stages]) expect(p.stderr()).not.toMatch(/link dead|broke|pipeline broken/);
    await cluster.stop();
  }, 120_000);
});

describe("a stage stuck inside a computation", () => {
  it("a stage whose computation stops moving while its heartbeat helper runs on is declared dead once it has finished no layer for --compute-stall-ms", async () => {
    const bigDir = await bigModelDir();
    const stallMs = 1500;
    const cluster = await startWithLogLevel("trace", bigDir, {
      stages: [
        [0, 1],
        [1, 4],
      ],
      dir,
      stageArgs: ["--compute-stall-ms", String(stallMs)],
    });
    const pid = cluster.stages[1]!.child.pid!;
    // A prompt that keeps stage 1 computing (three layers over it, in one synchronous pass) for
    // seconds: its helper thread heartbeats the links meanwhile. Stage 0 (one layer) computes it
    // first: 1500 tokens take it about 2 s and stage 1 4 to 5 s on a quiet machine (3000 took stage
    // 0 over 13 s, all of it before stage 1 began); the freeze below lands well within stage 1's.
    const prompt = Array.from({ length: 1500 }, (_, i) => 5 + (i % 250));
    const answer = fetch(`${cluster.baseUrl}/v1/completions`, { method: "POST", body: JSON.stringify({ prompt, max_tokens: 2, temperature: 0 }) }).then(
      async (r) => ({ status: r.status, text: await r.text() }),
      (error: unknown) => ({ status: 0, text: String(error) }),
    );
    // Once stage 1's main thread is inside its computation of the prompt, stop that thread alone: a
    // computation that never returns, as a deadlock leaves it. SIGSTOP would stop the helper too.
    // Inside it, not merely busy: work outside a computation (taking the request, setting up its
    // cache) has no helper heartbeating for it, so a freeze there is a plain silence, declared dead
    // 2.5 s after the last heartbeat, which says nothing of the helper. Stage 1 computes a chunk of
    // the prompt as it takes the chunk's activations, which it logs at trace level as it takes them
    // (kind 13), and it logs each computation's end; the freeze is aimed 150 ms of stage 1's CPU
    // after a chunk is taken (each chunk of 512 rows over three layers takes it about half a second
    // here), and the trace then says where it landed: after a chunk's taking with no end since, or
    // else it is let go and aimed again (a chunk seen late on a loaded machine can end first).
    const taken = /"kind":13,[^\n]*"msg":"frame"/g;
    const ended = /"msg":"(compute done|long compute)/g;
    const lastAt = (pattern: RegExp, text: string): number => Math.max(-1, ...[...text.matchAll(pattern)].map((m) => m.index));
    let tracer: ReturnType<typeof spawn> | undefined;
    let frozenAt = 0;
    for (let aim = 1; ; aim++) {
      let computingFrom: number | undefined;
      const seen = cluster.stages[1]!.stderr().length;
      await waitFor(
        () => {
          if (computingFrom === undefined && lastAt(taken, cluster.stages[1]!.stderr().slice(seen)) >= 0) computingFrom = mainThreadCpuMs(pid);
          return computingFrom !== undefined && mainThreadCpuMs(pid) - computingFrom >= 150;
        },
        30_000,
        "stage 1 computing the prompt",
      );
      const freezing = spawn("python3", [freezeThread, String(pid)], { stdio: ["ignore", "pipe", "inherit"] });
      await new Promise<void>((resolve, reject) => {
        freezing.stdout!.on("data", (d: Buffer) => d.toString().includes("frozen") && resolve());
        freezing.once("exit", (code) => reject(new Error(`freeze-thread.py exited ${code}`)));
      });
      frozenAt = performance.now();
      // What the thread wrote before it stopped reaches this process through a pipe: a moment.
      await new Promise((r) => setTimeout(r, 200));
      const trace = cluster.stages[1]!.stderr();
      if (lastAt(taken, trace) > lastAt(ended, trace)) {
        tracer = freezing;
        break;
      }
      const released = new Promise((r) => freezing.once("exit", r));
      freezing.kill();
      await released;
      if (aim === 3) throw new Error("three freezes of stage 1 landed outside a computation of the prompt");
    }
    try {
      // The helper vouches for the computation until it has gone stallMs without finishing a
      // layer, then the links fall silent and are declared dead 2.5 s later.
      let healthMs = 0;
      let health = { deadLinks: [] as string[] };
      await waitFor(
        async () => {
          const r = await fetch(`${cluster.baseUrl}/health`);
          healthMs = performance.now() - frozenAt;
          if (r.status !== 503) return false;
          health = (await r.json()) as typeof health;
          return health.deadLinks.includes("stage-1");
        },
        stallMs + 6000,
        "health 503 naming stage-1",
      );
      expect(healthMs).toBeGreaterThan(3000);
      expect(healthMs).toBeLessThan(stallMs + 4500);
      const failed = await answer;
      expect(failed.status).toBe(503);
      // Stage 0 finds its silent downstream dead at the same moment and exits: the request may
      // fail on either link.
      expect(failed.text).toMatch(/"code":"pipeline_broken"/);
      expect(await cluster.coordinator.exited).toBe(69);
      expect(cluster.coordinator.stderr()).toMatch(/"msg":"link dead: no frame from stage-1/);
      expect(await cluster.stages[0]!.exited).toBe(69);
      expect(lastLine(cluster.stages[0]!.stderr())).toMatch(/"peer":"stage-1","link":"downstream",.*"msg":"peer silent"/);
    } finally {
      tracer?.kill();
    }
    await killAll();
  }, 120_000);
});

/** A cluster whose processes log at debug level (their long computations are said as they end). */
async function startWithDebugLogs(...args: Parameters<typeof startCluster>): ReturnType<typeof startCluster> {
  return startWithLogLevel("debug", ...args);
}

/** startCluster with every engine process logging at `wanted` (trace: each frame as it is taken). */
async function startWithLogLevel(wanted: string, ...args: Parameters<typeof startCluster>): ReturnType<typeof startCluster> {
  const level = process.env.SHARD_ENGINE_LOG_LEVEL;
  process.env.SHARD_ENGINE_LOG_LEVEL = wanted;
  try {
    return await startCluster(...args);
  } finally {
    if (level === undefined) delete process.env.SHARD_ENGINE_LOG_LEVEL;
    else process.env.SHARD_ENGINE_LOG_LEVEL = level;
  }
}

/** The last line a process wrote. */
function lastLine(text: string): string {
  return text.trimEnd().split("\n").at(-1) ?? "";
}

/** CPU time a process's main thread has used, ms (Linux: utime + stime in clock ticks of 10 ms). */
function mainThreadCpuMs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/task/${pid}/stat`, "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(fields[11]) + Number(fields[12])) * 10;
}
