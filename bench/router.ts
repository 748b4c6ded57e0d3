/**
 * `npm run bench -- router [--requests N]`: the embedded router's proxy overhead per request. The
 * same small non-streaming chat completion is sent N times straight to a backend and N times through
 * `shardctl router` (a separate process, as deployed), interleaved so drift hits both alike; the
 * overhead is the difference of medians (goal ≤ 2 ms). `measureProxyOverhead` is exported for
 * bench/lifecycle.ts, which points it at a real coordinator and its router.
 *
 * Then the time to find a request's `model` in a 32 MiB body (the router's body limit) of tiny
 * objects, `{"model":…,"a":[{},{},…]}`: JSON.parse of the whole body, as the router once did, against
 * findModelField's scan. The router runs in the daemon, so this time is time its event loop is held.
 */
import { spawn } from "node:child_process";
import { Agent, createServer, request } from "node:http";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { findModelField } from "../src/router/find-model-field.js";

export type LatencyFigures = { medianMs: number; p95Ms: number; meanMs: number };

export type OverheadFigures = {
  requests: number;
  direct: LatencyFigures;
  routed: LatencyFigures;
  /** routed median − direct median, milliseconds. */
  overheadMedianMs: number;
  overheadP95Ms: number;
  /** routed median ÷ direct median. */
  medianRatio: number;
  goalMedianOverheadMs: number;
  meetsGoal: boolean;
};

export type OverheadOptions = {
  /** Base URL of the backend (coordinator) called directly, e.g. http://127.0.0.1:9100. */
  directUrl: string;
  /** Base URL of the router in front of it. */
  routedUrl: string;
  model: string;
  /** Requests each way. Default 2000. */
  requests?: number;
  /** Unmeasured requests each way first (connection set-up, JIT). Default 100. */
  warmup?: number;
  /** Chat completion `max_tokens`; small so the backend's own time stays small. Default 1. */
  maxTokens?: number;
};

/** Sequential, keep-alive, interleaved direct/routed requests; latencies in milliseconds. */
export async function measureProxyOverhead(options: OverheadOptions): Promise<OverheadFigures> {
  const { directUrl, routedUrl, model, requests = 2000, warmup = 100, maxTokens = 1 } = options;
  const body = JSON.stringify({ model, max_tokens: maxTokens, messages: [{ role: "user", content: "hi" }] });
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const direct: number[] = [];
  const routed: number[] = [];
  try {
    for (let i = 0; i < warmup; i++) {
      await postOnce(agent, directUrl, body);
      await postOnce(agent, routedUrl, body);
    }
    for (let i = 0; i < requests; i++) {
      // Alternate which goes first so neither side always follows the other.
      if (i % 2 === 0) {
        direct.push(await postOnce(agent, directUrl, body));
        routed.push(await postOnce(agent, routedUrl, body));
      } else {
        routed.push(await postOnce(agent, routedUrl, body));
        direct.push(await postOnce(agent, directUrl, body));
      }
    }
  } finally {
    agent.destroy();
  }
  const d = summarise(direct);
  const r = summarise(routed);
  const overheadMedianMs = round(r.medianMs - d.medianMs);
  return {
    requests,
    direct: d,
    routed: r,
    overheadMedianMs,
    overheadP95Ms: round(r.p95Ms - d.p95Ms),
    medianRatio: round(r.medianMs / d.medianMs),
    goalMedianOverheadMs: 2,
    meetsGoal: overheadMedianMs <= 2,
  };
}

function postOnce(agent: Agent, baseUrl: string, body: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const started = process.hrtime.bigint();
    const req = request(
      `${baseUrl}/v1/chat/completions`,
      { method: "POST", agent, headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body) } },
      (res) => {
        res.resume();
        res.on("end", () => {
          if (res.statusCode !== 200) reject(new Error(`${baseUrl}: HTTP ${res.statusCode}`));
          else resolve(Number(process.hrtime.bigint() - started) / 1e6);
        });
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

function summarise(samples: number[]): LatencyFigures {
  const sorted = [...samples].sort((a, b) => a - b);
  const at = (q: number): number => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? NaN;
  return { medianMs: round(at(0.5)), p95Ms: round(at(0.95)), meanMs: round(samples.reduce((sum, x) => sum + x, 0) / samples.length) };
}

function round(value: number): number {
  return Math.round(value * 1000) / 1000;
}

export async function run(args: string[]): Promise<object> {
  const at = args.indexOf("--requests");
  const requests = at === -1 ? 2000 : Number(args[at + 1]);
  if (!Number.isInteger(requests) || requests < 1) throw new Error(`expected --requests to be a positive integer, got "${args[at + 1]}"`);

  // A backend answering a fixed small chat completion, like a coordinator generating one token.
  const answer = JSON.stringify({
    id: "chatcmpl-bench",
    object: "chat.completion",
    created: 1,
    model: "bench-model",
    choices: [{ index: 0, message: { role: "assistant", content: "ok" }, finish_reason: "length" }],
    usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
  });
  const backend = createServer((req, res) => {
    req.resume();
    req.on("end", () => res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(answer) }).end(answer));
  });
  await new Promise<void>((done) => backend.listen(0, "127.0.0.1", done));
  const directUrl = `http://127.0.0.1:${(backend.address() as AddressInfo).port}`;

  const dir = await mkdtemp(join(tmpdir(), "shardctl-bench-router-"));
  const config = join(dir, "router.yaml");
  await writeFile(config, `server:\n  bind_address: "127.0.0.1:0"\nbackends:\n  - name: bench\n    url: "${directUrl}"\n    models: ["bench-model"]\n`);
  const cli = fileURLToPath(new URL("../src/cli/shardctl.js", import.meta.url));
  const router = spawn(process.execPath, [cli, "router", "--config", config], { stdio: ["ignore", "ignore", "pipe"] });
  let routerOverhead: OverheadFigures;
  try {
    const routedUrl = await new Promise<string>((resolve, reject) => {
      let text = "";
      router.stderr.on("data", (chunk: Buffer) => {
        text += chunk.toString();
        const match = /"url":"(http:\/\/[^"]+)"/.exec(text);
        if (match?.[1] !== undefined) resolve(match[1]);
      });
      router.once("exit", (code) => reject(new Error(`router exited with ${code}: ${text}`)));
    });
    routerOverhead = await measureProxyOverhead({ directUrl, routedUrl, model: "bench-model", requests });
  } finally {
    router.kill("SIGTERM");
    backend.close();
    await rm(dir, { recursive: true, force: true });
  }
  return { routerOverhead, modelLookup: measureModelLookup() };
}

export type ModelLookupFigures = {
  bodyBytes: number;
  /** JSON.parse of the whole body (decoded to a string first, as the router did), milliseconds; one run, it takes seconds. */
  wholeParseMs: number;
  /** findModelField's first run on the body, milliseconds: code not yet optimised, as in a daemon that has routed little. */
  scanFirstMs: number;
  /** findModelField on the body, median of `scanRuns` runs (the first included), milliseconds. */
  scanMedianMs: number;
  scanRuns: number;
  /** wholeParseMs ÷ scanMedianMs. */
  speedup: number;
};

/** Finding `model` in a body of `bodyBytes` (default 32 MiB) made of empty objects: whole-body JSON.parse against the scan. */
export function measureModelLookup(bodyBytes = 32 * 1024 * 1024, scanRuns = 11): ModelLookupFigures {
  const body = writeTinyObjectsBody(bodyBytes);
  const started = performance.now();
  const parsed = JSON.parse(body.toString("utf8")) as { model?: unknown };
  const wholeParseMs = performance.now() - started;
  const scans: number[] = [];
  for (let run = 0; run < scanRuns; run++) {
    const start = performance.now();
    const found = findModelField(body);
    scans.push(performance.now() - start);
    if (found?.model !== parsed.model) throw new Error(`the scan found ${JSON.stringify(found?.model)}, JSON.parse ${JSON.stringify(parsed.model)}`);
  }
  const scanMedianMs = summarise(scans).medianMs;
  return {
    bodyBytes: body.length,
    wholeParseMs: round(wholeParseMs),
    scanFirstMs: round(scans[0] ?? NaN),
    scanMedianMs,
    scanRuns,
    speedup: round(wholeParseMs / scanMedianMs),
  };
}

/** `{"model":"bench-model","a":[{},{},…]}`, as many `{}` as fit in `bytes` (the body is at most that long). */
function writeTinyObjectsBody(bytes: number): Buffer {
  const head = '{"model":"bench-model","a":[';
  const tail = "]}";
  // Each object is 2 bytes plus its comma, the first has none.
  const objects = Math.floor((bytes - head.length - tail.length + 1) / 3);
  const body = Buffer.alloc(head.length + objects * 3 - 1 + tail.length);
  let at = body.write(head, "latin1");
  for (let i = 0; i < objects; i++) {
    if (i > 0) body[at++] = 0x2c;
    body[at++] = 0x7b;
    body[at++] = 0x7d;
  }
  body.write(tail, at, "latin1");
  return body;
}
