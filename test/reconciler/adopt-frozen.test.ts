/**
 * A daemon restarted beside a cluster whose coordinator is frozen (SIGSTOP: its port accepts,
 * nothing answers) adopts what it finds running, but does not say Ready before a probe has seen it
 * serve: the adopting pass writes Ready Unknown, and the monitor's judgement (the stages' exit,
 * unanswered /health probes) takes it to False. Before, the adopting pass wrote Ready True.
 */
import { readFile } from "node:fs/promises";
import { afterAll, beforeAll, expect, test } from "vitest";
import type { ClusterStatus, Daemon } from "../../src/reconciler/index.js";
import { statusFileFor } from "../../src/reconciler/index.js";
import { join } from "node:path";
import {
  conditionOf,
  definitionText,
  enginePidOf,
  enginesOf,
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
  type DaemonWorld,
} from "./daemon-fixture.js";

let world: DaemonWorld;
let daemon: Daemon | undefined;
const name = "frozen";

beforeAll(async () => {
  world = await startWorld({ sshNodes: 2 });
});

afterAll(async () => {
  if (world !== undefined && daemon !== undefined) await removeDefinition(world, name);
  await daemon?.stop();
  const left = world === undefined ? [] : await enginesOf(world);
  await world?.close();
  expect(left).toEqual([]);
});

test("adopting a frozen coordinator after a restart: Ready is never True until the monitor has judged it", async () => {
  const hosts = ["127.0.0.1", ...world.hosts.values()];
  await writeDefinition(world, name, definitionText(world, { nodes: ["n1", "n2"], port: await freePort(), portRange: await freePortRange(hosts) }));
  const revision = await revisionOf(world, name);
  daemon = await startInProcessDaemon(world);
  const ready = await waitForStatus(world, name, (s) => isReadyAt(s, revision) && s.coordinator?.pid !== undefined);
  await daemon.stop();
  daemon = undefined;
  const coordinator = await enginePidOf(ready.coordinator!.pid!);
  process.kill(coordinator, "SIGSTOP");
  const file = statusFileFor(join(world.clustersDir, `${name}.toml`));
  const before = await readFile(file, "utf8");
  // Every status the new daemon writes, until Ready is withdrawn.
  const written: ClusterStatus[] = [];
  try {
    daemon = await startInProcessDaemon(world);
    const deadline = Date.now() + 15_000;
    let last = before;
    while (Date.now() < deadline) {
      const text = await readFile(file, "utf8").catch(() => last);
      if (text !== last) {
        last = text;
        const status = JSON.parse(text) as ClusterStatus;
        written.push(status);
        if (conditionOf(status, "Ready")?.status === "False") break;
      }
      await sleep(20);
    }
  } finally {
    try {
      process.kill(coordinator, "SIGCONT");
    } catch {
      // Already gone: the teardown killed it.
    }
  }
  const readies = written.map((s) => `${conditionOf(s, "Ready")?.status}/${conditionOf(s, "Ready")?.reason}`);
  expect(readies.at(-1), readies.join(" → ")).toMatch(/^False\//);
  // The adopting pass wrote before the withdrawal, and no write said Ready.
  expect(readies.length, readies.join(" → ")).toBeGreaterThan(1);
  expect(
    readies.filter((r) => r.startsWith("True/")),
    readies.join(" → "),
  ).toEqual([]);
  const adopted = written.find((s) => conditionOf(s, "Ready")?.status === "Unknown");
  expect(conditionOf(adopted!, "Ready")?.message).toMatch(/^found running, not yet seen serving: http:\/\/\S+\/health did not answer within the probe's deadline$/);
  // Once it answers again the cluster serves, relaunched or adopted.
  await waitForStatus(world, name, (s) => isReadyAt(s, revision), 60_000);
});
