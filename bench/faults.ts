/**
 * `npm run bench -- faults [--runs N] [--idle-seconds S] [--loss P]`: how fast the daemon tells
 * faults apart and acts, on the lab of network namespaces of test/faults (three stage hosts, each
 * with its own veth address and sshd; the daemon and coordinator in the root namespace), with the
 * production health timings (poll 1000 ms, probe deadline 1000 ms, 2 strikes). Needs root.
 *   - per fault — a stage host partitioned (iptables DROP both ways), its sshd killed while it
 *     serves, its engine stopped with SIGSTOP — the median over N runs (default 3) of the ms from
 *     the fault to: detection (the death's own timestamp, or the Degraded status for sshd loss),
 *     router deregistration, a truthful status file (Ready=False; Degraded for sshd loss), and
 *     Ready (Healthy) again after the heal (for SIGSTOP the relaunch heals it). Goal: deregistered
 *     within 5000 ms of a partition; sshd loss never deregisters.
 *   - false positives: deaths and Degraded reports on an idle cluster whose three stage hosts drop a
 *     fraction P (default 0.05) of packets each way, over S seconds (default 600: ten minutes).
 */
import { readFile } from "node:fs/promises";
import {
  conditionOf,
  definitionText,
  enginePidOf,
  freePort,
  freePortRange,
  isReadyAt,
  readStatusFile,
  revisionOf,
  sleep,
  waitForStatus,
  writeDefinition,
} from "../test/reconciler/daemon-fixture.js";
import { startLabWorld } from "../test/faults/support/lab-world.js";

const name = "bench";

export async function run(args: string[]): Promise<object> {
  const runs = numberArg(args, "--runs", 3);
  const idleSeconds = numberArg(args, "--idle-seconds", 600);
  const loss = numberArg(args, "--loss", 0.05);
  const { lab, world, daemon } = await startLabWorld(3, { layers: 6, restartBudget: 100 });
  try {
    await writeDefinition(
      world,
      name,
      definitionText(world, { nodes: ["n1", "n2", "n3"], port: await freePort(), portRange: await freePortRange(["127.0.0.1"]), register: true }),
    );
    const revision = await revisionOf(world, name);
    const healthy = (): Promise<unknown> => waitForStatus(world, name, (s) => isReadyAt(s, revision) && s.health === "Healthy" && s.stages.every((c) => c.alive), 90_000);
    await healthy();
    const registered = async (): Promise<boolean> => {
      const text = await readFile(world.routerConfig, "utf8");
      return text.slice(text.indexOf("backends:")).includes("url:");
    };
    const status = async () => (await readStatusFile(world, name))!;
    // The status keeps the last 5 deaths' evidence: deaths are counted by time, not by the list's length.
    const deathsSince = async (since: number): Promise<number> => ((await status()).restarts?.evidence ?? []).filter((e) => Date.parse(e.at) >= since).length;

    const measure = async (fault: { inject(): Promise<void>; heal(): Promise<void>; death: boolean }): Promise<Record<string, number | null>> => {
      await healthy();
      const at = Date.now();
      await fault.inject();
      const seen: { detectedMs: number | null; deregisteredMs: number | null; truthfulStatusMs: number | null } = {
        detectedMs: null,
        deregisteredMs: null,
        truthfulStatusMs: null,
      };
      const deadline = at + (fault.death ? 15_000 : 8_000);
      while (Date.now() < deadline) {
        const s = await status().catch(() => undefined);
        if (seen.deregisteredMs === null && !(await registered())) seen.deregisteredMs = Date.now() - at;
        const truthful = fault.death ? conditionOf(s!, "Ready")?.status === "False" : s?.health === "Degraded";
        if (s !== undefined && seen.truthfulStatusMs === null && truthful) seen.truthfulStatusMs = Date.now() - at;
        const death = s?.restarts?.evidence.find((e) => Date.parse(e.at) >= at);
        if (fault.death && death !== undefined && seen.detectedMs === null) seen.detectedMs = Date.parse(death.at) - at;
        if (!fault.death && seen.truthfulStatusMs !== null) seen.detectedMs = seen.truthfulStatusMs ?? null;
        if (seen.truthfulStatusMs !== null && (fault.death ? seen.deregisteredMs !== null && seen.detectedMs !== null : Date.now() - at > 5_000)) break;
        await sleep(25);
      }
      const healAt = Date.now();
      await fault.heal();
      await healthy();
      return { ...seen, readyAfterHealMs: Date.now() - healAt, deaths: await deathsSince(at) };
    };

    const faults: Record<string, () => { inject(): Promise<void>; heal(): Promise<void>; death: boolean }> = {
      stageHostPartition: () => ({ inject: () => lab.hosts[1]!.partition(), heal: async () => (await sleep(3_000), await lab.hosts[1]!.heal()), death: true }),
      sshdLoss: () => ({ inject: () => lab.hosts[2]!.killSshd(), heal: () => lab.hosts[2]!.startSshd(), death: false }),
      sigstop: () => {
        let pid = 0;
        return {
          inject: async () => {
            pid = await enginePidOf((await status()).stages.find((c) => c.node === "n1")!.pid!);
            process.kill(pid, "SIGSTOP");
          },
          heal: async () => {
            try {
              process.kill(pid, "SIGCONT");
            } catch {
              // Stopped for real by the teardown already.
            }
          },
          death: true,
        };
      },
    };
    const figures: Record<string, object> = {};
    for (const [fault, make] of Object.entries(faults)) {
      const samples: Array<Record<string, number | null>> = [];
      for (let i = 0; i < runs; i++) samples.push(await measure(make()));
      const keys = Object.keys(samples[0]!);
      figures[fault] = { ...Object.fromEntries(keys.map((k) => [k, median(samples.map((s) => s[k] ?? null))])), samples };
    }

    // False positives over an idle, lossy cluster.
    await healthy();
    const idleFrom = Date.now();
    for (const host of lab.hosts) await host.loss(loss);
    let degraded = 0;
    let last = "Healthy";
    const until = Date.now() + idleSeconds * 1_000;
    while (Date.now() < until) {
      const health = (await status().catch(() => undefined))?.health ?? last;
      if (health === "Degraded" && last !== "Degraded") degraded++;
      last = health;
      await sleep(100);
    }
    for (const host of lab.hosts) await host.heal();
    const falsePositives = { idleSeconds, lossEachWay: loss, deaths: await deathsSince(idleFrom), degradedReports: degraded };

    return { runs, timings: "production: poll 1000 ms, probe deadline 1000 ms, 2 strikes; stop grace 2000 ms (test fixture)", faults: figures, falsePositives };
  } finally {
    // The figures are taken: a clean-up that hangs is reported, not allowed to swallow them.
    const stopped = await Promise.race([daemon.stop().then(() => true), sleep(30_000).then(() => false)]);
    if (stopped === false) console.error("faults bench: the daemon did not stop within 30 s; its clusters are left to the lab's clean-up");
    await lab.close();
    await world.close();
  }
}

function median(values: Array<number | null>): number | null {
  const numbers = values.filter((v): v is number => v !== null).sort((a, b) => a - b);
  return numbers.length === 0 ? null : numbers[Math.floor(numbers.length / 2)]!;
}

function numberArg(args: string[], flag: string, fallback: number): number {
  const i = args.indexOf(flag);
  const value = i < 0 ? undefined : Number(args[i + 1]);
  return value === undefined || !Number.isFinite(value) ? fallback : value;
}
