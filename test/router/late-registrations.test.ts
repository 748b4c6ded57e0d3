/**
 * An admin API that applies a registration after answering too late: the registrar gave up on it
 * (its deadline passed), withdrew it (a launch's rollback, a teardown), and then the router applied
 * it, routing a removed cluster's model to nothing for good. `sweep` takes back exactly such
 * entries: what this registrar withdrew lately, under the name and URL it withdrew, and did not
 * register again since; never a hand-made entry of the same name elsewhere, nor one older than
 * its watch. A local server speaks the admin paths (continuum-router cannot run here).
 */
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, expect, test } from "vitest";
import { createContinuumAdminRegistrar } from "../../src/router/continuum-admin-registrar.js";
import type { BackendEntry } from "../../src/router/index.js";
import { isShardctlError } from "../../src/errors/index.js";
import { allocateHost } from "../support/test-world.js";

let server: Server;
let adminUrl: string;
const store = new Map<string, BackendEntry>();
/** Requests held back (by method and name): applied, and answered, when the test lets them go. */
const held = new Map<string, () => void>();
const holdNext = new Set<string>();
let normaliseUrls = false;
/** Each admin call's deadline, ms: long enough for a call answered at once on a loaded machine; a held one passes it. */
const callDeadlineMs = 1_500;

beforeAll(async () => {
  server = createServer((req, res) => {
    void bodyOf(req).then((body) => {
      if (req.method === "GET") return void res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify([...store.values()]));
      if (req.method === "POST") {
        const sent = JSON.parse(body) as BackendEntry;
        // As a router that parses URLs gives them back (`http://h:1/`).
        const entry = normaliseUrls ? { ...sent, url: new URL(sent.url).href } : sent;
        const apply = (): void => {
          store.set(entry.name, entry);
          res.writeHead(201).end();
        };
        if (holdNext.delete(`POST ${entry.name}`)) held.set(`POST ${entry.name}`, apply);
        else apply();
        return;
      }
      const name = /^\/admin\/backends\/([^/]+)$/.exec(req.url ?? "")?.[1];
      if (req.method === "DELETE" && name !== undefined) {
        const apply = (): void => void res.writeHead(store.delete(decodeURIComponent(name)) ? 204 : 404).end();
        if (holdNext.delete(`DELETE ${name}`)) held.set(`DELETE ${name}`, apply);
        else apply();
        return;
      }
      res.writeHead(405).end();
    });
  });
  const host = await allocateHost();
  await new Promise<void>((done) => server.listen(0, host, done));
  adminUrl = `http://${host}:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((done) => server.close(done));
});

async function bodyOf(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString();
}

/** Registers `entry` with the server holding it back: the registrar's deadline passes first. */
async function registerTimingOut(registrar: ReturnType<typeof createContinuumAdminRegistrar>, entry: BackendEntry): Promise<void> {
  holdNext.add(`POST ${entry.name}`);
  const error: unknown = await registrar.register(entry).catch((caught: unknown) => caught);
  expect(isShardctlError(error, "RouterRegistrationFailed"), String(error)).toBe(true);
}

function letGo(request: string): void {
  held.get(request)!();
  held.delete(request);
}

async function until(check: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 200 && !check(); i++) await new Promise((done) => setTimeout(done, 10));
  if (!check()) throw new Error(`not within 2 s: ${what}`);
}

test("a registration applied after its withdrawal is taken back; a live one, a re-registered one and a hand-made one of a withdrawn name are left", async () => {
  store.clear();
  const registrar = createContinuumAdminRegistrar({ adminUrl, timeoutMs: callDeadlineMs });
  // The launch's registration times out and is rolled back while the router has not applied it.
  const late = { name: "late", url: "http://127.0.0.1:9101", models: ["m1"] };
  await registerTimingOut(registrar, late);
  await registrar.deregister("late");
  // Another cluster's, registered and still wanted.
  const live = { name: "live", url: "http://127.0.0.1:9102", models: ["m2"] };
  await registrar.register(live);
  // Withdrawn (a teardown), then someone registers the same name at another URL by hand.
  await registrar.register({ name: "hand", url: "http://127.0.0.1:9103", models: ["m3"] });
  await registrar.deregister("hand");
  const hand = { name: "hand", url: "http://10.0.0.9:8000", models: ["m3"] };
  store.set("hand", hand);
  // Withdrawn, then registered again at the same URL (a relaunch on the same port).
  const again = { name: "again", url: "http://127.0.0.1:9104", models: ["m4"] };
  await registrar.register(again);
  await registrar.deregister("again");
  await registrar.register(again);

  expect(await registrar.sweep!()).toEqual([]);
  // Now the router applies the registration it was holding: after its withdrawal.
  letGo("POST late");
  expect(store.get("late")).toEqual(late);
  expect(await registrar.sweep!()).toEqual([late]);
  expect([...store.keys()].sort()).toEqual(["again", "hand", "live"]);
  expect(store.get("hand")).toEqual(hand);
  // Nothing left to take back.
  expect(await registrar.sweep!()).toEqual([]);
});

test("a withdrawal is watched for a while only: a registration applied after the watch ends is left", async () => {
  store.clear();
  const registrar = createContinuumAdminRegistrar({ adminUrl, timeoutMs: callDeadlineMs, watchWithdrawnMs: 500 });
  const late = { name: "later", url: "http://127.0.0.1:9105", models: ["m5"] };
  await registerTimingOut(registrar, late);
  await registrar.deregister("later");
  await new Promise((done) => setTimeout(done, 700));
  letGo("POST later");
  expect(await registrar.sweep!()).toEqual([]);
  expect(store.get("later")).toEqual(late);
});

test("a registration of a name while a sweep removes it waits for the removal: the registration stands", async () => {
  store.clear();
  const registrar = createContinuumAdminRegistrar({ adminUrl, timeoutMs: callDeadlineMs });
  const old = { name: "cross", url: "http://127.0.0.1:9106", models: ["m6"] };
  await registerTimingOut(registrar, old);
  await registrar.deregister("cross");
  letGo("POST cross");
  // The sweep's removal reaches the router and is held there while the relaunch registers the name.
  holdNext.add("DELETE cross");
  const sweeping = registrar.sweep!();
  await until(() => held.has("DELETE cross"), "the sweep's removal reaches the router");
  const relaunched = { ...old, url: "http://127.0.0.1:9107" };
  const registering = registrar.register(relaunched);
  await new Promise((done) => setTimeout(done, 200));
  letGo("DELETE cross");
  expect(await sweeping).toEqual([old]);
  await registering;
  // Applied in the order asked: the removal, then the registration.
  expect(store.get("cross")).toEqual(relaunched);
});

test("a router that gives URLs back in their parsed form (a trailing /) has its late arrival taken back all the same", async () => {
  store.clear();
  normaliseUrls = true;
  try {
    const registrar = createContinuumAdminRegistrar({ adminUrl, timeoutMs: callDeadlineMs });
    await registerTimingOut(registrar, { name: "parsed", url: "http://127.0.0.1:9108", models: ["m8"] });
    await registrar.deregister("parsed");
    letGo("POST parsed");
    expect(store.get("parsed")?.url).toBe("http://127.0.0.1:9108/");
    expect((await registrar.sweep!()).map((e) => e.name)).toEqual(["parsed"]);
    expect(store.has("parsed")).toBe(false);
  } finally {
    normaliseUrls = false;
  }
});
