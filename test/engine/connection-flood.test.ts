/**
 * Clients that open connections to the coordinator and never finish a request (a header line now
 * and then) cannot use up its descriptors, which its stage links need: past half of them (here 128
 * of `ulimit -n 256`) new connections are dropped at once, a request head not arrived within 10 s
 * is cut, and new clients are served again. A real shard-engine process on a leased loopback
 * address, its limit set by the shell that starts it.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { closedWithin, openUnfinishedRequests } from "../support/unfinished-requests.js";
import { bundledShardEngineCommand } from "../../src/engines/index.js";
import { makeTestModel } from "../../src/planner/test-model/index.js";
import { freePort, killAll, nextHost, requireBuild, spawnEngine, waitHealthy, type EngineProcess } from "./support.js";

let dir: string;
let engine: EngineProcess;
let baseUrl: string;

beforeAll(async () => {
  requireBuild();
  dir = await mkdtemp(join(tmpdir(), "engine-flood-"));
  const modelDir = join(dir, "m");
  await makeTestModel(modelDir, { layers: 2, hidden: 64, seed: 5 });
  const host = await nextHost();
  const port = await freePort(host);
  engine = spawnEngine(["-m", modelDir, "--host", host, "--port", String(port)], ["bash", "-c", 'ulimit -n 256 && exec "$@"', "bash", ...bundledShardEngineCommand]);
  baseUrl = `http://${host}:${port}`;
  await waitHealthy(baseUrl, [engine]);
}, 60_000);
afterAll(async () => {
  await killAll();
  await rm(dir, { recursive: true, force: true });
});

it("300 connections that never finish their request head: dropped past the cap at once, the rest cut once 10 s late; the coordinator lives and serves", async () => {
  const url = new URL(baseUrl);
  const started = Date.now();
  const held = await openUnfinishedRequests(url, 300, "POST /v1/completions HTTP/1.1");
  expect(await closedWithin(held, 1_000)).toBeGreaterThanOrEqual(300 - 128);
  expect(engine.child.exitCode).toBeNull();
  const closedAt = await Promise.all(held.map((h) => h.closed));
  expect(Math.max(...closedAt) - started).toBeLessThan(13_000);
  expect(engine.stderr()).toContain('"limit":128');
  expect((await fetch(`${baseUrl}/health`)).status).toBe(200);
}, 30_000);
