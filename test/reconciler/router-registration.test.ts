/**
 * A resync confirms the router still has the backend the ledger says was registered: one removed
 * from the router's config behind the daemon's back (a router restarted without it, a hand edit)
 * is registered again, and the cluster stays Ready. A second definition registered under the same
 * backend name (a copy that kept it) is refused at its launch, and the router entry stays the first
 * cluster's. The daemon runs in this process on two local nodes, with the embedded router on its YAML
 * config.
 */
import { readFileSync, watch } from "node:fs";
import { readFile, writeFile } from "node:fs/promises";
import { expect, test } from "vitest";
import type { ClusterStatus } from "../../src/reconciler/index.js";
import { readRouterConfig } from "../../src/router/index.js";
import { conditionOf, isReadyAt, killStage, removeDefinition, sleep, waitForStatus } from "./daemon-fixture.js";
import { useDaemonWorld } from "./use-daemon-world.js";

// Resync every second.
const dw = useDaemonWorld({ settings: { enabled: true, router: true }, resyncMs: 1_000 });

test("a backend the router lost is registered again at the next resync", async () => {
  const { world } = dw;
  await dw.define("routed", { nodes: ["l1", "l2"], register: true });
  const ready = await waitForStatus(world, "routed", (s) => isReadyAt(s), 90_000);
  expect(conditionOf(ready, "Registered")).toMatchObject({ status: "True", reason: "BackendRegistered" });
  // Ready means routed: the embedded router reloads its config as the registration is made, not
  // when its file watch fires (a CI run here read an empty model list just after Ready).
  const models = (await (await fetch(`${dw.daemon.routerUrl}/v1/models`)).json()) as { data: Array<{ id: string }> };
  expect(models.data.map((m) => m.id)).toContain(world.modelDir);
  const registered = await readFile(world.routerConfig, "utf8");
  expect(registered).toContain(ready.coordinator!.url);
  // The router's backends emptied behind the daemon's back.
  await writeFile(world.routerConfig, registered.replace(/backends:[\s\S]*$/, "backends: []\n"));
  const deadline = Date.now() + 20_000;
  while (!(await readFile(world.routerConfig, "utf8")).includes(ready.coordinator!.url) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200));
  expect(await readFile(world.routerConfig, "utf8")).toContain(ready.coordinator!.url);
  expect(isReadyAt((await waitForStatus(world, "routed", () => true))!)).toBe(true);
}, 180_000);

test("a second cluster under the backend name a running one holds: RouterBackendTaken (Stalled), the entry stays the first's; still refused, its status unchanged, when the holder relaunches under that name; launched once the holder is removed", async () => {
  const { world } = dw;
  const running = await waitForStatus(world, "routed", (s) => isReadyAt(s), 90_000);
  const { port, portRange } = await dw.freeAddresses();
  await dw.define("canary", { nodes: ["l1", "l2"], register: true, backend: "routed", port, portRange });
  // Stalled, as the pass that refused it left it: a second pass (the definition's write seen as two
  // events on a loaded machine) says Progressing for a moment while it refuses it again.
  const refused = await waitForStatus(world, "canary", (s) => s.lastError?.reason === "RouterBackendTaken" && s.health === "Stalled", 60_000);
  expect(refused.lastError?.message).toContain('[router] backend "routed" is the router entry of cluster routed, which runs');
  expect(refused.stages).toEqual([]);
  const config = await readFile(world.routerConfig, "utf8");
  expect(config).toContain(running.coordinator!.url);
  expect(config).not.toContain(`:${port}`);
  expect(isReadyAt((await waitForStatus(world, "routed", () => true))!)).toBe(true);

  // The holder launched again under the same name (a stage killed, the cluster relaunched): it
  // let nothing go. The refused cluster, woken by the holder's launch, is refused before its pass
  // says anything of a launch: its status never flips (Stalled, then Progressing and "launching",
  // then Stalled again, at every relaunch of the holder).
  const from = world.audit.versions.length;
  const before = running.restarts?.count ?? 0;
  await killStage(running, 0);
  const relaunched = await waitForStatus(world, "routed", (s) => isReadyAt(s) && (s.restarts?.count ?? 0) > before, 90_000);
  expect(relaunched.coordinator!.pid).not.toBe(running.coordinator!.pid);
  // A pass the relaunch might have woken has had time to write.
  await sleep(1_000);
  const said = world.audit.statusesOf("canary", from).map((s) => `${s.health} ${s.lastError?.reason} Stalled=${conditionOf(s, "Stalled")?.status}`);
  expect(said.filter((line) => line !== "Stalled RouterBackendTaken Stalled=True")).toEqual([]);

  // The holder removed lets the name go: the refused cluster launches under it.
  expect(await removeDefinition(world, "routed", 60_000)).toBe(true);
  const launched = await waitForStatus(world, "canary", (s) => isReadyAt(s), 60_000);
  expect(conditionOf(launched, "Registered")?.status).toBe("True");
  expect(await readFile(world.routerConfig, "utf8")).toContain(launched.coordinator!.url);
}, 180_000);

test("two clusters written at once under one router backend name: one is registered, the other RouterBackendTaken (Stalled), never said registered", async () => {
  const { world } = dw;
  const names = ["pair-a", "pair-b"];
  await Promise.all(names.map((name) => dw.define(name, { nodes: ["l1", "l2"], register: true, backend: "shared" })));
  const refusedOf = (s: ClusterStatus): boolean => s.lastError?.reason === "RouterBackendTaken" && s.health === "Stalled";
  const loser = await Promise.race(names.map((name) => waitForStatus(world, name, refusedOf, 120_000).then(() => name)));
  const winner = names.find((n) => n !== loser)!;
  const ready = await waitForStatus(world, winner, (s) => isReadyAt(s), 120_000);
  expect(conditionOf(ready, "Registered")).toMatchObject({ status: "True" });
  // The router's one entry of that name is the winner's, and the loser never claimed it.
  const config = await readFile(world.routerConfig, "utf8");
  expect(config).toContain(ready.coordinator!.url);
  const versions = world.audit.statusesOf(loser);
  expect(versions.filter((v) => v.router?.registered === true || conditionOf(v, "Registered")?.status === "True")).toEqual([]);
  expect(refusedOf((await waitForStatus(world, loser, () => true))!)).toBe(true);
  // Pruned before the next removal: a directory emptied while two clusters still run (a removed
  // definition's cluster runs for 2 s more) is refused as a mass prune.
  for (const name of names) expect(await removeDefinition(world, name, 60_000)).toBe(true);
}, 240_000);

test("a backend renamed in place: the router routes the model at every moment (the new entry goes in before the old one goes out)", async () => {
  const { world } = dw;
  const { port, portRange } = await dw.freeAddresses();
  const revision = await dw.define("renamed", { nodes: ["l1", "l2"], register: true, backend: "first", port, portRange });
  const ready = await waitForStatus(world, "renamed", (s) => isReadyAt(s, revision), 90_000);
  const coordinatorPid = ready.coordinator!.pid;
  // Every edit of the router's config, read as it lands: none may lack an entry for the model.
  const versions: string[] = [];
  const seen = watch(world.routerConfig, () => {
    try {
      versions.push(readFileSync(world.routerConfig, "utf8"));
    } catch {
      // Replaced under the read: the next event reads it.
    }
  });
  try {
    const renamed = await dw.define("renamed", { nodes: ["l1", "l2"], register: true, backend: "second", port, portRange });
    const applied = await waitForStatus(world, "renamed", (s) => isReadyAt(s, renamed) && s.router?.backend === "second", 60_000);
    expect(applied.coordinator!.pid).toBe(coordinatorPid);
  } finally {
    seen.close();
  }
  expect(versions.length).toBeGreaterThan(0);
  for (const version of versions) expect(version.includes('name: "first"') || version.includes('name: "second"'), version).toBe(true);
  const config = await readFile(world.routerConfig, "utf8");
  expect(config).toContain('name: "second"');
  expect(config).not.toContain('name: "first"');
  expect(await removeDefinition(world, "renamed", 60_000)).toBe(true);
}, 180_000);

test("a router-only edit onto the backend name another running cluster holds: refused (RouterBackendTaken), that cluster keeps its entry, and the edited one serves on under its own until the name is let go", async () => {
  const { world } = dw;
  const held = await dw.freeAddresses();
  const holderRevision = await dw.define("holder", { nodes: ["l1", "l2"], register: true, backend: "held", ...held });
  const own = await dw.freeAddresses();
  const moverRevision = await dw.define("mover", { nodes: ["l1", "l2"], register: true, backend: "own", ...own });
  const holder = await waitForStatus(world, "holder", (s) => isReadyAt(s, holderRevision), 90_000);
  const mover = await waitForStatus(world, "mover", (s) => isReadyAt(s, moverRevision), 90_000);
  const backends = async (): Promise<Record<string, string>> => Object.fromEntries((await readRouterConfig(world.routerConfig)).backends.map((b) => [b.name, b.url]));
  expect(await backends()).toMatchObject({ held: holder.coordinator!.url, own: mover.coordinator!.url });

  // The same processes under another router name (applied in place, no restart), but one the holder has.
  const from = world.audit.versions.length;
  const edited = await dw.define("mover", { nodes: ["l1", "l2"], register: true, backend: "held", ...own });
  const refused = await waitForStatus(world, "mover", (s) => s.lastError?.reason === "RouterBackendTaken", 60_000);
  expect(refused.lastError?.message).toContain('[router] backend "held" is the router entry of cluster holder, which runs');
  expect(conditionOf(refused, "Stalled")).toMatchObject({ status: "True", reason: "RouterBackendTaken" });
  // The holder's entry is its own, and the mover still serves, from the same processes, under its old name.
  expect(await backends()).toMatchObject({ held: holder.coordinator!.url, own: mover.coordinator!.url });
  expect(refused.coordinator?.pid).toBe(mover.coordinator!.pid);
  expect((await fetch(`${mover.coordinator!.url}/health`)).status).toBe(200);
  expect(conditionOf(refused, "Ready")?.status).toBe("True");
  expect(refused.router).toMatchObject({ backend: "own", registered: true });
  expect(world.audit.statusesOf("mover", from).filter((s) => s.router?.backend !== "own")).toEqual([]);

  // The holder removed lets the name go: the rename is applied, still without a restart.
  expect(await removeDefinition(world, "holder", 60_000)).toBe(true);
  const renamed = await waitForStatus(world, "mover", (s) => isReadyAt(s, edited) && s.router?.backend === "held", 60_000);
  expect(renamed.coordinator?.pid).toBe(mover.coordinator!.pid);
  const after = await backends();
  expect(after).toMatchObject({ held: mover.coordinator!.url });
  expect(after).not.toHaveProperty("own");
  expect(await removeDefinition(world, "mover", 60_000)).toBe(true);
}, 180_000);

test("an edit that relaunches, onto the backend name another running cluster holds: refused before anything is staged or torn down; the running revision serves on under its own name", async () => {
  const { world } = dw;
  const held = await dw.freeAddresses();
  const holderRevision = await dw.define("keeper", { nodes: ["l1", "l2"], register: true, backend: "kept", ...held });
  const own = await dw.freeAddresses();
  const revision = await dw.define("switcher", { nodes: ["l1", "l2"], register: true, backend: "mine", ...own });
  await waitForStatus(world, "keeper", (s) => isReadyAt(s, holderRevision), 90_000);
  const serving = await waitForStatus(world, "switcher", (s) => isReadyAt(s, revision), 90_000);

  // Another coordinator port asks for a relaunch; the name asked for is the keeper's.
  const moved = await dw.freeAddresses();
  await dw.define("switcher", { nodes: ["l1", "l2"], register: true, backend: "kept", port: moved.port, portRange: own.portRange });
  const refused = await waitForStatus(world, "switcher", (s) => s.lastError?.reason === "RouterBackendTaken", 60_000);
  expect(conditionOf(refused, "Stalled")).toMatchObject({ status: "True", reason: "RouterBackendTaken" });
  expect(conditionOf(refused, "Ready")).toMatchObject({ status: "True", observedRevision: revision });
  expect(refused.coordinator?.pid).toBe(serving.coordinator!.pid);
  expect(refused.stages.map((s) => s.pid)).toEqual(serving.stages.map((s) => s.pid));
  expect(refused.router).toMatchObject({ backend: "mine", registered: true });
  expect((await fetch(`${serving.coordinator!.url}/health`)).status).toBe(200);

  for (const name of ["switcher", "keeper"]) expect(await removeDefinition(world, name, 60_000)).toBe(true);
}, 180_000);
