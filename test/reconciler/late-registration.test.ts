/**
 * A router driven through its admin API that applies a registration after answering too late: the
 * launch's registration times out (5 s), the launch is rolled back (its DELETE finds nothing yet),
 * the definition is removed, and only then does the router apply the registration. The daemon's
 * periodic resync takes it back: a removed cluster's model is not left routed to nothing for good.
 * A hand-made entry in the same router is left alone. The daemon runs in this process on two local
 * nodes; a local server speaks the admin paths (continuum-router cannot run here).
 */
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { expect, test } from "vitest";
import type { BackendEntry } from "../../src/router/index.js";
import { allocateHost } from "../support/test-world.js";
import { readStatusFile, removeDefinition, sleep, waitForStatus, writeSettings } from "./daemon-fixture.js";
import { useDaemonWorld } from "./use-daemon-world.js";

const store = new Map<string, BackendEntry>();
/** The first registration, answered and applied when the test lets it go. */
let heldRegistration: (() => void) | undefined;
let admin: Server;

const dw = useDaemonWorld({
  resyncMs: 1_000,
  prepare: async (world) => {
    admin = createServer((req, res) => {
      void bodyOf(req).then((body) => {
        if (req.method === "GET") return void res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ backends: [...store.values()] }));
        if (req.method === "POST") {
          const entry = JSON.parse(body) as BackendEntry;
          const apply = (): void => {
            store.set(entry.name, entry);
            res.writeHead(201).end();
          };
          if (heldRegistration === undefined && entry.name === "late") heldRegistration = apply;
          else apply();
          return;
        }
        const name = /^\/admin\/backends\/([^/]+)$/.exec(req.url ?? "")?.[1];
        if (req.method === "DELETE" && name !== undefined) return void res.writeHead(store.delete(decodeURIComponent(name)) ? 204 : 404).end();
        res.writeHead(405).end();
      });
    });
    const host = await allocateHost();
    await new Promise<void>((done) => admin.listen(0, host, done));
    const adminUrl = `http://${host}:${(admin.address() as AddressInfo).port}`;
    await writeSettings(world, {
      enabled: true,
      extra: ["[router]", 'kind = "continuum"', `config = ${JSON.stringify(world.routerConfig)}`, `admin_url = ${JSON.stringify(adminUrl)}`, ""].join("\n"),
    });
  },
});

async function bodyOf(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString();
}

test("a registration the admin API applies after the launch's rollback and the cluster's removal is taken back at the next resync; a hand-made entry stays", async () => {
  const { world } = dw;
  const hand = { name: "by-hand", url: "http://10.0.0.9:8000", models: ["other"] };
  store.set(hand.name, hand);
  await dw.define("late", { nodes: ["l1", "l2"], register: true });
  const failed = await waitForStatus(world, "late", (s) => s.lastError?.reason === "RouterRegistrationFailed", 60_000);
  expect(failed.lastError!.message).toMatch(/could not register backend "late" with the router: .*(?:timeout|aborted)/i);
  expect(heldRegistration).toBeDefined();
  expect(await removeDefinition(world, "late", 60_000)).toBe(true);
  expect(await readStatusFile(world, "late")).toBeUndefined();
  expect(store.has("late")).toBe(false);
  // Now the router applies the registration it held: after its rollback and the cluster's removal.
  heldRegistration!();
  expect(store.get("late")?.models).toEqual([world.modelDir]);
  // Resyncs come every second here (30 s by default).
  for (let i = 0; i < 100 && store.has("late"); i++) await sleep(100);
  expect([...store.values()]).toEqual([hand]);
  admin.closeAllConnections();
  await new Promise((done) => admin.close(done));
}, 120_000);
