/**
 * The router's YAML rewritten behind the daemon's back without a cluster's backend (config
 * management, a hand edit): the daemon watches the file, so the cluster is registered again within
 * moments, not at the next resync (here ten minutes away), and its status does not keep saying
 * Registered meanwhile for long. The daemon runs in this process on two local nodes, with the
 * embedded router on its YAML config.
 */
import { readFile, writeFile } from "node:fs/promises";
import { expect, test } from "vitest";
import { conditionOf, isReadyAt, waitForStatus } from "./daemon-fixture.js";
import { useDaemonWorld } from "./use-daemon-world.js";

// A resync far beyond the test: only the watch can bring the backend back in time.
const dw = useDaemonWorld({ settings: { enabled: true, router: true }, resyncMs: 600_000 });

test("a backend removed from the router's YAML is registered again within seconds, without waiting for the resync", async () => {
  const { world } = dw;
  await dw.define("watched", { nodes: ["l1", "l2"], register: true });
  const ready = await waitForStatus(world, "watched", (s) => isReadyAt(s) && s.health === "Healthy", 90_000);
  // Past the looks that follow a launch (a pass a second or two after it): only a resync or the
  // watch looks again now.
  await new Promise((r) => setTimeout(r, 8_000));
  expect(conditionOf(ready, "Registered")).toMatchObject({ status: "True", reason: "BackendRegistered" });
  const registered = await readFile(world.routerConfig, "utf8");
  expect(registered).toContain(ready.coordinator!.url);
  const removedAt = Date.now();
  await writeFile(world.routerConfig, registered.replace(/backends:[\s\S]*$/, "backends: []\n"));
  const deadline = Date.now() + 10_000;
  while (!(await readFile(world.routerConfig, "utf8")).includes(ready.coordinator!.url) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
  expect(await readFile(world.routerConfig, "utf8")).toContain(ready.coordinator!.url);
  expect(Date.now() - removedAt).toBeLessThan(10_000);
  // The router routes the model again (it reloads its file just after the registration writes it).
  const routed = async (): Promise<string[]> =>
    ((await (await fetch(`${dw.daemon.routerUrl}/v1/models`)).json()) as { data: Array<{ id: string }> }).data.map((m) => m.id);
  while (!(await routed()).includes(world.modelDir) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
  expect(await routed()).toContain(world.modelDir);
}, 180_000);

test("a backend whose URL or models were changed in the YAML (an old copy restored) is registered again as it runs", async () => {
  const { world } = dw;
  const ready = await waitForStatus(world, "watched", (s) => isReadyAt(s) && s.health === "Healthy", 90_000);
  const url = ready.coordinator!.url;
  const wrongUrl = url.replace(/:(\d+)$/, (_, port: string) => `:${Number(port) === 1 ? 2 : Number(port) - 1}`);
  for (const [what, edit] of [
    ["url", (text: string) => text.split(url).join(wrongUrl)],
    ["models", (text: string) => text.split(JSON.stringify(world.modelDir)).join('"typo-model"')],
  ] as const) {
    const registered = await readFile(world.routerConfig, "utf8");
    const edited = edit(registered);
    expect(edited, `the ${what} edit changes the file`).not.toBe(registered);
    await writeFile(world.routerConfig, edited);
    const deadline = Date.now() + 10_000;
    const restored = async (): Promise<boolean> => {
      const text = await readFile(world.routerConfig, "utf8");
      return text.includes(url) && !text.includes(wrongUrl) && !text.includes("typo-model");
    };
    while (!(await restored()) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    expect(await restored(), `the ${what} edit is undone`).toBe(true);
  }
}, 180_000);
