/**
 * Clusters launched while no router was configured (`[router] kind` "none") are registered when a
 * daemon with a router adopts them, without a restart. Two of them under one `[router] backend`
 * name: one is registered, and the other serves on unregistered, saying why (Registered False,
 * RouterBackendTaken), rather than replacing the first one's entry. The daemon runs in this process
 * on two local nodes; the second one runs the embedded router on the world's YAML config.
 */
import { readFile } from "node:fs/promises";
import { expect, test } from "vitest";
import { Ledger } from "../../src/launch/index.js";
import { conditionOf, isReadyAt, waitForStatus, writeSettings } from "./daemon-fixture.js";
import { useDaemonWorld } from "./use-daemon-world.js";

const dw = useDaemonWorld({ settings: { enabled: true } });

test("two clusters under one backend name, launched with no router and adopted by a daemon with one: one is registered, the other serves on unregistered (Registered False, RouterBackendTaken)", async () => {
  const { world } = dw;
  const names = ["uno", "dos"];
  const pids = new Map<string, Array<number | undefined>>();
  for (const name of names) {
    const serving = await dw.waitServing(name, await dw.define(name, { nodes: ["l1", "l2"], register: true, backend: "shared" }), 90_000);
    pids.set(
      name,
      serving.stages.map((c) => c.pid),
    );
  }
  await dw.stopDaemon();
  await writeSettings(world, { enabled: true, router: true });
  await dw.startDaemon();
  const decided = (s: Parameters<typeof conditionOf>[0]): boolean =>
    conditionOf(s, "Registered")?.status === "True" || conditionOf(s, "Registered")?.reason === "RouterBackendTaken";
  const statuses = await Promise.all(names.map((name) => waitForStatus(world, name, decided, 60_000)));
  const registered = statuses.filter((s) => conditionOf(s, "Registered")?.status === "True");
  expect(registered.map((s) => s.cluster)).toHaveLength(1);
  const [winner] = registered;
  const refused = statuses.find((s) => s !== winner)!;
  expect(conditionOf(refused, "Registered")).toMatchObject({ status: "False", reason: "RouterBackendTaken" });
  expect(conditionOf(refused, "Registered")?.message).toContain(`[router] backend "shared" is the router entry of cluster ${winner!.cluster}`);
  // Both serve, neither restarted: the refused one keeps its processes and answers at its own address.
  for (const s of statuses) {
    expect(isReadyAt(s)).toBe(true);
    expect(s.stages.map((c) => c.pid)).toEqual(pids.get(s.cluster));
  }
  expect(refused.router?.registered).not.toBe(true);
  expect((await new Ledger(world.stateDir).read(refused.cluster))?.routerBackend).toBeUndefined();
  const config = await readFile(world.routerConfig, "utf8");
  expect(config).toContain(winner!.coordinator!.url);
  expect(config).not.toContain(refused.coordinator!.url);
}, 240_000);
