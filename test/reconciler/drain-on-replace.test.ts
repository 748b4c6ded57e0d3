/**
 * A planned teardown (an edit that replaces the cluster) stops the coordinator first and its
 * stages after it: a stream being generated through the router then ends as the coordinator's
 * drain ends it — a clean end with a `server_shutting_down` error event — not with the connection
 * reset, nor with a "pipeline broken" error because a stage went first. Two sshd nodes, the
 * embedded router; the engine's drain is shortened to 400 ms so the stream is still generating when
 * it ends.
 */
import { join } from "node:path";
import { expect, test } from "vitest";
import { makeTestModel } from "../../src/planner/test-model/index.js";
import { isReadyAt, waitForStatus } from "./daemon-fixture.js";
import { useDaemonWorld } from "./use-daemon-world.js";

let longModel: string;

const dw = useDaemonWorld({
  sshNodes: 2,
  settings: { router: true },
  prepare: async (world) => {
    // Its greedy reply to "go" runs to thousands of tokens (seconds) without an end-of-sequence token.
    longModel = join(world.root, "models", "long");
    await makeTestModel(longModel, { layers: 4, hidden: 64, seed: 5 });
  },
});

test("a replacing edit while a stream is generated: the stream ends with server_shutting_down, cleanly, the coordinator stopped before its stages", async () => {
  const { world, daemon } = dw;
  const extraArgs = ["--connect-timeout-ms", "5000", "--broken-exit-delay-ms", "200", "--drain-ms", "400"];
  const options = { nodes: ["n1", "n2"], ...(await dw.freeAddresses()), register: true, modelId: longModel, contextLength: 8192, extraArgs };
  const first = await dw.define("drained", options);
  await dw.waitServing("drained", first, 90_000);

  const response = await fetch(`${daemon.routerUrl}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: longModel, prompt: "go", max_tokens: 8000, stream: true, temperature: 0 }),
  });
  expect(response.status).toBe(200);
  const reader = response.body!.getReader();
  const events: string[] = [];
  let text = "";
  const read = async (until: () => boolean): Promise<"end" | "open"> => {
    while (!until()) {
      const { value, done } = await reader.read();
      if (done) return "end";
      text += Buffer.from(value).toString("utf8");
      const parts = text.split("\n\n");
      text = parts.pop()!;
      for (const part of parts) if (part.startsWith("data: ")) events.push(part.slice(6));
    }
    return "open";
  };
  expect(await read(() => events.length >= 5)).toBe("open");

  // A new context length: the cluster is replaced while the stream runs.
  const second = await dw.define("drained", { ...options, contextLength: 4096 });
  const ended = await read(() => false).catch((error: unknown) => `reset: ${(error as Error).message}`);
  expect(ended).toBe("end");
  expect(events.at(-1)).toMatch(/"code":"server_shutting_down"/);
  expect(events.some((e) => e.includes("pipeline_broken") || e.includes("Pipeline broken"))).toBe(false);
  expect(events).not.toContain("[DONE]");
  await waitForStatus(world, "drained", (s) => isReadyAt(s, second), 90_000);
}, 240_000);
