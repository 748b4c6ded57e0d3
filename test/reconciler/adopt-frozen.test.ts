/**
 * A daemon restarted beside a cluster whose coordinator is frozen (SIGSTOP: its port accepts,
 * nothing answers) adopts what it finds running, but does not say Ready before a probe has seen it
 * serve: the adopting pass writes Ready Unknown, and the monitor's judgement (the stages' exit,
 * unanswered /health probes) takes it to False. Before, the adopting pass wrote Ready True.
 */
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { expect, test } from "vitest";
import type { ClusterStatus } from "../../src/reconciler/index.js";
import { statusFileFor } from "../../src/reconciler/index.js";
import { conditionOf, enginePidOf, isReadyAt, sleep, waitForStatus } from "./daemon-fixture.js";
import { useDaemonWorld } from "./use-daemon-world.js";

// The daemon is started by the test: the cluster must run before the restart it adopts it at.
const dw = useDaemonWorld({ sshNodes: 2, daemon: "none" });
const name = "frozen";

test("adopting a frozen coordinator after a restart: Ready is never True until the monitor has judged it", async () => {
  const { world } = dw;
  const revision = await dw.define(name, { nodes: ["n1", "n2"] });
  await dw.startDaemon();
  const ready = await waitForStatus(world, name, (s) => isReadyAt(s, revision) && s.coordinator?.pid !== undefined);
  await dw.stopDaemon();
  const coordinator = await enginePidOf(ready.coordinator!.pid!);
  process.kill(coordinator, "SIGSTOP");
  const file = statusFileFor(join(world.clustersDir, `${name}.toml`));
  const before = await readFile(file, "utf8");
  // Every status the new daemon writes, until Ready is withdrawn.
  const written: ClusterStatus[] = [];
  try {
    await dw.startDaemon();
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
