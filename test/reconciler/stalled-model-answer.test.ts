/**
 * A registered cluster that stalls (its restart budget spent) is not a model that "does not exist":
 * the embedded router answers 503 `model_stalled` naming the cluster and the reason — what an
 * OpenAI client raises with that message — instead of a 404 it reads as a typo. The mark survives a
 * daemon restart (the new daemon drops every stalled mark as it starts and its first pass sets this
 * one again), ends when `shardctl reconcile` brings the cluster back, and goes with a removed
 * definition.
 */
import { readFile } from "node:fs/promises";
import { expect, test } from "vitest";
import { relaunchFileOf } from "../../src/router/index.js";
import { conditionOf, killStage, removeDefinition, runShardctl, sleep, waitForStatus, type DaemonWorld } from "./daemon-fixture.js";
import { useDaemonWorld } from "./use-daemon-world.js";

const dw = useDaemonWorld({ sshNodes: 2, settings: { router: true, restartBudget: 1 } });

/** The router's answer to a completion of the world's model: status and error code. */
async function askModel(world: DaemonWorld, routerUrl: string): Promise<{ status: number; code?: string; message?: string }> {
  const response = await fetch(`${routerUrl}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: world.modelDir, prompt: "hi", max_tokens: 1 }),
  });
  const body = (await response.json()) as { error?: { code: string; message: string } };
  return { status: response.status, ...(body.error === undefined ? {} : { code: body.error.code, message: body.error.message }) };
}

/** Ask until the answer's status is `status` (20 s); the last answer. */
/** The router's answer once it has `status` (and, when given, the error `code`), or the last one at the deadline (20 s). */
async function untilAnswered(world: DaemonWorld, routerUrl: string, status: number, code?: string): Promise<{ status: number; code?: string; message?: string }> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const answer = await askModel(world, routerUrl);
    if ((answer.status === status && (code === undefined || answer.code === code)) || Date.now() > deadline) return answer;
    await sleep(100);
  }
}

const stalledMarksOf = async (world: DaemonWorld): Promise<Record<string, { cluster: string; reason: string; since: string }>> => {
  const text = await readFile(relaunchFileOf(world.routerConfig), "utf8").catch(() => "{}");
  return (JSON.parse(text) as { stalled?: Record<string, { cluster: string; reason: string; since: string }> }).stalled ?? {};
};

test("a stalled cluster's model: 503 model_stalled naming the cluster and why, through a daemon restart; served again after reconcile; gone with its definition", async () => {
  const { world } = dw;
  const revision = await dw.define("stally", { nodes: ["n1", "n2"], register: true });
  const serving = await dw.waitServing("stally", revision);
  expect((await askModel(world, dw.daemon.routerUrl!)).status).toBe(200);

  // The budget of 1 is spent by the first launch: one death stalls the cluster.
  await killStage(serving, 1);
  const stalled = await waitForStatus(world, "stally", (s) => s.health === "Stalled", 60_000);
  expect(conditionOf(stalled, "Stalled")?.reason).toBe("RestartBudgetExhausted");
  // Until the teardown has deregistered the backend, the dying coordinator may answer 503 pipeline_broken itself.
  const answer = await untilAnswered(world, dw.daemon.routerUrl!, 503, "model_stalled");
  expect(answer).toMatchObject({ status: 503, code: "model_stalled" });
  expect(answer.message).toContain("its cluster `stally` stalled (RestartBudgetExhausted)");
  expect(answer.message).toContain("`shardctl reconcile stally`");
  expect((await stalledMarksOf(world))[world.modelDir]).toMatchObject({ cluster: "stally", reason: "RestartBudgetExhausted" });

  // A new daemon: the mark is dropped as it starts and set again by its first pass.
  await dw.stopDaemon();
  await dw.startDaemon();
  const again = await untilAnswered(world, dw.daemon.routerUrl!, 503);
  expect(again.code).toBe("model_stalled");
  expect((await stalledMarksOf(world))[world.modelDir]).toMatchObject({ cluster: "stally", reason: "RestartBudgetExhausted" });

  // `shardctl reconcile` brings it back: served, no mark left.
  expect((await runShardctl(world, ["reconcile", "stally"])).code).toBe(0);
  await dw.waitServing("stally", revision, 60_000);
  expect((await untilAnswered(world, dw.daemon.routerUrl!, 200)).status).toBe(200);
  expect(await stalledMarksOf(world)).toEqual({});

  // Stalled again, then its definition removed: the model is unknown (404), no mark is left.
  const servingAgain = await waitForStatus(world, "stally", (s) => s.health === "Healthy", 30_000);
  await killStage(servingAgain, 0);
  await waitForStatus(world, "stally", (s) => s.health === "Stalled", 60_000);
  // The status says Stalled as the death is recorded; until the teardown has deregistered the backend
  // (moments later) the dying coordinator answers 503 pipeline_broken itself.
  expect((await untilAnswered(world, dw.daemon.routerUrl!, 503, "model_stalled")).code).toBe("model_stalled");
  expect(await removeDefinition(world, "stally", 60_000)).toBe(true);
  expect((await untilAnswered(world, dw.daemon.routerUrl!, 404)).code).toBe("model_not_found");
  expect(await stalledMarksOf(world)).toEqual({});
}, 240_000);
