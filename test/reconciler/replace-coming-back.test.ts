/**
 * An edit that replaces a registered cluster (a new launch identity) never makes its model unknown
 * to the router: while the old launch is torn down and the new one comes up, the embedded router
 * answers 503 with Retry-After (clients retry) — never 404 (they give up) — then 200 again.
 */
import { afterAll, beforeAll, expect, test } from "vitest";
import type { Daemon } from "../../src/reconciler/index.js";
import {
  definitionText,
  freePort,
  freePortRange,
  isReadyAt,
  removeDefinition,
  revisionOf,
  sleep,
  startInProcessDaemon,
  startWorld,
  waitForStatus,
  writeDefinition,
  writeSettings,
  type DaemonWorld,
} from "./daemon-fixture.js";

let world: DaemonWorld;
let daemon: Daemon;

beforeAll(async () => {
  world = await startWorld({ sshNodes: 2 });
  await writeSettings(world, { router: true });
  daemon = await startInProcessDaemon(world);
});

afterAll(async () => {
  if (world !== undefined) await removeDefinition(world, "edited");
  await daemon?.stop();
  await world?.close();
});

test("a replacing edit: 503 with Retry-After while the model comes back, never 404", async () => {
  const hosts = ["127.0.0.1", ...world.hosts.values()];
  const port = await freePort();
  const range = await freePortRange(hosts);
  const options = { nodes: ["n1", "n2"], port, portRange: range, register: true };
  await writeDefinition(world, "edited", definitionText(world, options));
  const first = await revisionOf(world, "edited");
  await waitForStatus(world, "edited", (s) => isReadyAt(s, first) && s.stages.every((c) => c.alive));

  // Ask the router for the model without pause while the edit is applied.
  const statuses = new Map<number, number>();
  let retryAfter: string | null = null;
  let asking = true;
  const asker = (async () => {
    while (asking) {
      const response = await fetch(`${daemon.routerUrl}/v1/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: world.modelDir, prompt: "hi", max_tokens: 1 }),
      }).catch(() => undefined);
      if (response !== undefined) {
        statuses.set(response.status, (statuses.get(response.status) ?? 0) + 1);
        if (response.status === 503) retryAfter = response.headers.get("retry-after");
        await response.body?.cancel();
      }
      await sleep(20);
    }
  })();

  // A new context length is a new launch identity: the cluster is replaced.
  await writeDefinition(world, "edited", definitionText(world, { ...options, contextLength: 512 }));
  const second = await revisionOf(world, "edited");
  await waitForStatus(world, "edited", (s) => isReadyAt(s, second) && s.stages.every((c) => c.alive));
  await sleep(300);
  asking = false;
  await asker;

  expect(statuses.get(404) ?? 0).toBe(0);
  expect(statuses.get(503) ?? 0).toBeGreaterThan(0);
  expect(retryAfter).toMatch(/^\d+$/);
  expect(statuses.get(200) ?? 0).toBeGreaterThan(0);
});
