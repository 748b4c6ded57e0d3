/**
 * An edit that replaces a registered cluster (a new launch identity) never makes its model unknown
 * to the router: while the old launch is torn down and the new one comes up, the embedded router
 * answers 503 with Retry-After (clients retry) — never 404 (they give up) — then 200 again.
 */
import { expect, test } from "vitest";
import { sleep } from "./daemon-fixture.js";
import { useDaemonWorld } from "./use-daemon-world.js";

const dw = useDaemonWorld({ sshNodes: 2, settings: { router: true } });

test("a replacing edit: 503 with Retry-After while the model comes back, never 404", async () => {
  const { world, daemon } = dw;
  const options = { nodes: ["n1", "n2"], ...(await dw.freeAddresses()), register: true };
  const first = await dw.define("edited", options);
  await dw.waitServing("edited", first);

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
  const second = await dw.define("edited", { ...options, contextLength: 512 });
  await dw.waitServing("edited", second);
  await sleep(300);
  asking = false;
  await asker;

  expect(statuses.get(404) ?? 0).toBe(0);
  expect(statuses.get(503) ?? 0).toBeGreaterThan(0);
  expect(retryAfter).toMatch(/^\d+$/);
  expect(statuses.get(200) ?? 0).toBeGreaterThan(0);
});
