/**
 * A stage host cut off from everyone names nobody else as silent, on a lab of network namespaces
 * (test/faults/support/netns.ts): the daemon, the embedded router and the coordinator in the root
 * namespace, stage-0 on n1 and stage-1 on n2, each host in its own namespace with its own sshd.
 *
 * What a flapping link does to the words of a death: the daemon finds n2's stage silent (its
 * transport port does not answer from the coordinator's node) and tears the cluster down; stage-0
 * and the coordinator are stopped before their own liveness bound ran out, so they never say whom
 * they stopped hearing; stage-1, cut off, keeps running until its bound runs out and logs that its
 * peers went silent — it heard nobody, since nothing reached it. The link comes back, its log is
 * read, and the death must still name the member the daemon found silent, not a healthy peer that
 * the cut-off member stopped hearing.
 *
 * Made deterministic, where a flapping link makes it a matter of timing: n2 drops every TCP segment
 * that comes to it — the pipeline's links to stage-1's transport port, the link stage-1 dialed to
 * the coordinator's control address (its results), the daemon's probes, and its sshd (so the
 * teardown cannot stop stage-1 before it speaks) — and the monitor's probes are quick
 * (every 300 ms, deadline 300 ms, 2 strikes, and silence not asked again with a longer deadline:
 * the death is found within about 1 s, well before the engines' 2.5 s bound). The link heals as soon as stage-1 has logged its "peer silent" line.
 */
import { execFile } from "node:child_process";
import { readFile } from "node:fs/promises";
import { promisify } from "node:util";
import { expect, it } from "vitest";
import { chat, conditionOf } from "../reconciler/daemon-fixture.js";
import { enginesPerPlace, watchDeathWords } from "./support/death-words.js";
import { useLabCluster } from "./support/lab-cluster.js";
import { until } from "./support/world-checks.js";

const run = promisify(execFile);
const name = "cutoff";
const cluster = useLabCluster(name, {
  hosts: 2,
  layers: 4,
  restartBudget: 4,
  monitor: { pollIntervalMs: 300, probeTimeoutMs: 300, slowPathTimeoutMs: 0, strikes: 2 },
  define: {},
  cutOff: 1,
});

it("a stage cut off from everyone that reports its peers silent before the link heals: the death names it, never a healthy peer", async () => {
  const n2 = cluster.lab.hosts[1]!;
  const entry = (await cluster.ledger())!;
  const stage1 = entry.processes.find((p) => p.role === "stage" && p.index === 1)!;
  const deathsBefore = (await cluster.status()).restarts?.evidence.length ?? 0;

  const cutAt = Date.now();
  const watcher = await watchDeathWords(cluster.world, name, cutAt);
  const timings: Record<string, number> = {};
  try {
    // Whatever TCP comes to n2 is dropped (no FIN, no RST); n2's own packets still leave.
    await run("ip", ["netns", "exec", n2.netns, "iptables", "-w", "-I", "INPUT", "-p", "tcp", "-j", "DROP"]);
    const notReadyAt = await until(async () => conditionOf(await cluster.status(), "Ready")?.status === "False", 10_000, "Ready=False", 20);
    timings.notReady = notReadyAt - cutAt;
    const death = (await cluster.status()).restarts!.evidence;
    expect(death.length, "one more death in the restart evidence").toBe(deathsBefore + 1);
    // The daemon's own evidence, before the engines' bound (2.5 s) could have ended anything.
    expect(death.at(-1)!.message).toMatch(/^stage-1 on n2: transport \S+ was silent from local/);
    // stage-1 (the lab's hosts share this file system) says whom it stopped hearing.
    const spokeAt = await until(async () => (await readFile(stage1.logFile, "utf8")).includes('"msg":"peer silent"'), 10_000, "stage-1 reported a silent peer", 20);
    timings.stage1Spoke = spokeAt - cutAt;
  } finally {
    await n2.heal();
    timings.healed = Date.now() - cutAt;
  }

  const ready = await cluster.waitForReady(60_000);
  timings.readyAfterHeal = Date.now() - cutAt - timings.healed;
  const { namings, readyLines, lastWords } = await watcher.stop();
  console.log(
    `cut-off reporter: timings ms ${JSON.stringify(timings)}\n  Ready as written:\n    ${readyLines.join("\n    ")}\n  the members' words:\n    ${lastWords.join("\n    ")}`,
  );
  expect(namings, "a status named a healthy member as the one that stopped answering, on the word of the member that was cut off").toEqual([]);
  const evidence = ready.restarts!.evidence.at(-1)!;
  expect(evidence.message).toMatch(/^stage-1 on n2: transport \S+ was silent from local/);
  // Its log was read after the heal (else there was nothing to be misled by): it is the evidence's tail.
  expect(
    evidence.logTail.some((line) => line.includes('"msg":"peer silent"')),
    "stage-1's report of a silent peer read into the evidence",
  ).toBe(true);
  expect(await enginesPerPlace(cluster.world, cluster.lab), "one engine set after the heal (n1, n2, the root namespace)").toEqual([1, 1, 1]);
  expect(await chat(ready.coordinator!.url, cluster.world.modelDir)).toBeTypeOf("string");
  expect(cluster.world.audit.problems).toEqual([]);
}, 90_000);
