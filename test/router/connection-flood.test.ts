/**
 * Clients that open connections to the embedded router and never finish a request (a header line
 * now and then) cannot use up its process's descriptors: past its cap (a quarter of the process's
 * descriptors, here 64 of `ulimit -n 256`) new connections are dropped at once, a request head that
 * has not arrived within 10 s is cut, and the router answers again once the flood is cut. In the
 * daemon, whose router and dashboard this is, the descriptors left are those its supervision needs.
 * The built CLI's `shardctl router`, real sockets on a leased loopback address.
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { closedWithin, openUnfinishedRequests } from "../support/unfinished-requests.js";
import { allocateHost } from "../support/test-world.js";
import { spawnRouter, type RouterProcess } from "./support/router-process.js";

let dir: string;
let router: RouterProcess;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "shardctl-router-flood-"));
  const host = await allocateHost();
  const config = join(dir, "router.yaml");
  await writeFile(config, `server:\n  bind_address: "${host}:0"\nbackends: []\n`);
  router = await spawnRouter(config, [], 10_000, 256);
});
afterAll(async () => {
  await router?.stop();
  await rm(dir, { recursive: true, force: true });
});

it("300 connections that never finish their request head: the router drops those past its cap at once, cuts the rest once their heads are 10 s late, lives on and answers", async () => {
  const url = new URL(router.url);
  const started = Date.now();
  const held = await openUnfinishedRequests(url, 300, "GET /v1/models HTTP/1.1");
  // Past the cap (64), connections are dropped as they come.
  expect(await closedWithin(held, 1_000)).toBeGreaterThanOrEqual(300 - 64);
  expect(router.child.exitCode).toBeNull();
  expect(
    router
      .logs()
      .some(
        (l) => l.msg === "router connections dropped: this many clients hold connections already (clients that send no request are cut after 10 s)" && l.limit === 64,
      ),
  ).toBe(true);
  // The ones it took are cut once their heads are 10 s late (checked every second).
  const closedAt = await Promise.all(held.map((h) => h.closed));
  expect(Math.max(...closedAt) - started).toBeLessThan(13_000);
  const answer = await fetch(`${router.url}/v1/models`);
  expect(answer.status).toBe(200);
  for (const h of held) h.socket.destroy();
}, 30_000);
