/**
 * The checks the link-cut fault tests make of each cut, and the bounds they share: Ready=False and
 * one more death recorded within the liveness bound plus the daemon's detection; after the heal, no
 * status having named a member as the one that stopped answering, and the cluster back whole.
 */
import { expect } from "vitest";
import type { ClusterStatus } from "../../../src/reconciler/index.js";
import { chat, conditionOf, readStatusFile, type DaemonWorld } from "../../reconciler/daemon-fixture.js";
import { enginesPerPlace } from "./death-words.js";
import type { Lab } from "./netns.js";
import { until } from "./world-checks.js";

/**
 * How soon after the cut the status must say Ready=False, ms. The end deaf first heard its peer at
 * most one heartbeat (500 ms) plus one liveness tick (100 ms) before the cut, and declares it dead
 * on the first tick after 2500 ms of silence: within 2600 ms. A stage exits at once, the coordinator
 * 200 ms later (--broken-exit-delay-ms, the fixture's). The daemon learns the exit from its exit
 * watch at once, or at worst from its next liveness poll (1000 ms) bounded by the probe deadline
 * (1000 ms) — 4800 ms — and writes Ready=False as it records the death.
 */
export const notReadyBoundMs = 5_000;
/** The earliest either end can declare the other dead: 2500 ms of silence, less the heartbeat and tick it may have been waiting for. */
export const earliestDetectionMs = 1_900;
/**
 * How long a cut is held after Ready=False, ms: the death's words are final by then — the named
 * member asked again after `linkSkewMs` (1200 ms), each log read bounded at 2000 ms — with a margin.
 */
export const holdAfterNotReadyMs = 3_500;

/** The death a cut made at `cutAt` caused: its reason and when it showed, ms after the cut. */
export interface CutDeath {
  death: string;
  notReady: number;
  detection: number;
}

/**
 * Wait for Ready=False after a cut made at `cutAt`, then check the restart evidence holds one death
 * more than `deathsBefore`, that Ready=False came within `notReadyBoundMs` and that the death came
 * no earlier than the liveness bound allows (else it was not the cut's).
 */
export async function expectCutDeath(world: DaemonWorld, cluster: string, round: number, cutAt: number, deathsBefore: number): Promise<CutDeath> {
  const notReadyAt = await until(
    async () => conditionOf((await readStatusFile(world, cluster))!, "Ready")?.status === "False",
    notReadyBoundMs + 5_000,
    `cut ${round}: Ready=False`,
    20,
  );
  const notReady = notReadyAt - cutAt;
  const evidence = (await readStatusFile(world, cluster))!.restarts?.evidence;
  expect(evidence?.length, `cut ${round}: one more death in the restart evidence`).toBe(deathsBefore + 1);
  const recorded = evidence!.at(-1)!;
  const detection = Date.parse(recorded.at) - cutAt;
  expect(notReady, `cut ${round}: Ready=False ${notReady} ms after the cut (bound ${notReadyBoundMs} ms)`).toBeLessThan(notReadyBoundMs);
  expect(detection, `cut ${round}: a death before the liveness bound could run out was not the cut's`).toBeGreaterThanOrEqual(earliestDetectionMs);
  return { death: recorded.reason, notReady, detection };
}

/**
 * After the heal, with `ready` the status that says so: no status written meanwhile named a member
 * as the one that stopped answering (`namings`, from watchDeathWords; `cutWhat` says what was cut),
 * the death's evidence names a member, one engine set runs (n1, n2, the root namespace) and a
 * completion answers.
 */
export async function expectBackWhole(world: DaemonWorld, lab: Lab, round: number, ready: ClusterStatus, namings: string[], cutWhat: string): Promise<void> {
  expect(namings, `cut ${round}: a status named a member as the one that stopped answering, though only ${cutWhat} was cut`).toEqual([]);
  expect(ready.restarts?.evidence.at(-1)?.message, `cut ${round}: the death's evidence names a member of the cluster`).toMatch(
    /^(stage-[01] on n[12]|coordinator on local): /,
  );
  expect(await enginesPerPlace(world, lab), `cut ${round}: one engine set after the heal (n1, n2, the root namespace)`).toEqual([1, 1, 1]);
  expect(await chat(ready.coordinator!.url, world.modelDir)).toBeTypeOf("string");
}
