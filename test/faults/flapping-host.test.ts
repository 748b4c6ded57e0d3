/**
 * A flapping stage host, on a lab of network namespaces (test/faults/support/netns.ts): the daemon,
 * the embedded router and the coordinator in the root namespace, stage-0 on n1 and stage-1 on n2,
 * each host in its own namespace with its own sshd; the daemon at the production health timings.
 * n2 is cut off (iptables DROP both ways: no FIN, no RST) and healed again and again, 1–3 s each
 * way for about 20 s, then healed for good: some cuts outlast the engines' liveness bound (2.5 s)
 * and end the pipeline, some do not, and relaunches start and end while the link comes and goes.
 *
 * Shown: no status written meanwhile names a member on a healthy host (n1, the root namespace) as
 * the one that stopped answering; after the last heal the cluster serves again exactly once — one
 * engine set, nothing else of the cluster left on n2 (no orphaned engine, no port held but the new
 * stage's), one ledger entry, one router backend — and answers a completion.
 */
import { execFile } from "node:child_process";
import { readFile, readlink } from "node:fs/promises";
import { promisify } from "node:util";
import { expect, it } from "vitest";
import { chat, sleep } from "../reconciler/daemon-fixture.js";
import { enginesPerPlace, watchDeathWords } from "./support/death-words.js";
import { useLabCluster } from "./support/lab-cluster.js";
import { ledgerNames, routerBackends } from "./support/world-checks.js";

const run = promisify(execFile);
const name = "flapping";
/** Cut, then healed, ms each: fixed, so every run makes the same weather. */
const cuts: Array<[number, number]> = [
  [1_200, 1_000],
  [2_800, 1_500],
  [1_000, 2_500],
  [3_000, 1_200],
  [1_800, 1_000],
  [2_600, 2_000],
];
// Every cut that ends the pipeline spends a launch of the budget: enough for all of them.
const cluster = useLabCluster(name, { hosts: 2, layers: 4, restartBudget: cuts.length + 4, define: {}, cutOff: 1 });

/**
 * The processes of a lab host's namespace other than its sshd and the commands sshd runs for the
 * daemon (an exit watch, a probe), as "pid args". An engine runs in its own session, reparented
 * away from sshd: an orphan is listed.
 */
async function enginesOn(netnsPids: number[]): Promise<string[]> {
  const lines: string[] = [];
  for (const pid of netnsPids) {
    if (await isSshdOrUnder(pid)) continue;
    const { stdout } = await run("ps", ["-o", "args=", "-p", String(pid)]).catch(() => ({ stdout: "" }));
    if (stdout.trim() !== "") lines.push(`${pid} ${stdout.trim()}`);
  }
  return lines;
}

/** The process is sshd or runs under it (its parent, or an ancestor further up, is sshd). */
async function isSshdOrUnder(pid: number): Promise<boolean> {
  for (let p = pid; p > 1;) {
    if ((await readlink(`/proc/${p}/exe`).catch(() => "")).endsWith("/sshd")) return true;
    const stat = await readFile(`/proc/${p}/stat`, "utf8").catch(() => "");
    if (stat === "") return true; // Gone meanwhile: nothing left to count.
    p = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
  }
  return false;
}

it("a stage host cut off and healed every 1–3 s: no healthy member named as silent, and back exactly once after the last heal", async () => {
  const n2 = cluster.lab.hosts[1]!;
  const startedAt = Date.now();
  const watcher = await watchDeathWords(cluster.world, name, startedAt);
  const launchesBefore = (await cluster.status()).restarts?.count ?? 0;
  let healedAt = startedAt;
  try {
    for (const [cutMs, healMs] of cuts) {
      await n2.partition();
      await sleep(cutMs);
      await n2.heal();
      healedAt = Date.now();
      await sleep(healMs);
    }
  } finally {
    await n2.heal();
  }
  const ready = await cluster.waitForReady(60_000);
  const readyAfterHealMs = Date.now() - healedAt;
  const { namings, readyLines } = await watcher.stop();
  const launches = ready.restarts!.count - launchesBefore;
  console.log(
    `flapping host: ${Math.round((healedAt - startedAt) / 1000)} s of flapping, ${launches} launches, Ready ${readyAfterHealMs} ms after the last heal\n  Ready as written:\n    ${readyLines.join("\n    ")}`,
  );

  // Naming stage-1 on n2 is the truth; naming anyone else is not.
  expect(namings.filter((n) => /(\S+ on \S+) stopped answering \(/.exec(n)?.[1] !== "stage-1 on n2")).toEqual([]);

  // Back exactly once.
  expect(await enginesPerPlace(cluster.world, cluster.lab), "one engine set (n1, n2, the root namespace)").toEqual([1, 1, 1]);
  const entry = (await cluster.ledger())!;
  expect(await ledgerNames(cluster.world)).toEqual([name]);
  expect(entry.phase).toBe("running");
  const stage1 = entry.processes.find((p) => p.node === "n2")!;
  // On n2 the new stage's wrapper and its engine, nothing else of the cluster.
  const onN2 = await enginesOn(await n2.pids());
  expect(
    onN2.filter((line) => !line.includes(stage1.runDir)),
    "processes on n2 that are not the cluster's",
  ).toEqual([]);
  expect(onN2).toHaveLength(2);
  expect(onN2.map((line) => Number(line.split(" ")[0]))).toContain(stage1.pid);
  const { stdout } = await run("ip", ["netns", "exec", n2.netns, "ss", "-Htln"]);
  const ports = stdout
    .split("\n")
    .filter((l) => l.trim() !== "")
    .map((l) => Number(/:(\d+)\s/.exec(l.trim().split(/\s+/).slice(3).join(" ") + " ")?.[1]))
    .sort((a, b) => a - b);
  expect(ports, "ports listening on n2: sshd's and the new stage's").toEqual([22, entry.ports.find((p) => p.node === "n2")!.port].sort((a, b) => a - b));
  expect((await routerBackends(cluster.world)).match(/url:/g), "one router backend").toHaveLength(1);
  expect(await chat(ready.coordinator!.url, cluster.world.modelDir)).toBeTypeOf("string");
  expect(cluster.world.audit.problems).toEqual([]);
}, 120_000);
