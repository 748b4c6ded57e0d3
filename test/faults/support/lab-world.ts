/**
 * The world of the fault tests and the fault bench: a lab of namespaced stage hosts (n1…nN, see
 * netns.ts), a daemon world whose nodes are those hosts, with the embedded router, and its daemon in
 * this process at the production health timings (nothing sped up) unless a test asks for others. A
 * start that fails midway takes down what it began. No vitest imports.
 */
import type { Daemon } from "../../../src/reconciler/index.js";
import {
  removeDefinition,
  startInProcessDaemon,
  startWorld,
  writeSettings,
  type DaemonWorld,
  type LaunchTimings,
  type MonitorTimings,
} from "../../reconciler/daemon-fixture.js";
import { startLab, type Lab, type LabHost } from "./netns.js";
import { enginePids, killPids, ledgerNames } from "./world-checks.js";

export interface LabWorld {
  lab: Lab;
  world: DaemonWorld;
  daemon: Daemon;
}

/**
 * `hosts` stage hosts; a test model of `layers` layers; the daemon's restart budget per revision;
 * the health monitor's timings (default the production ones: poll 1000 ms, probe deadline 1000 ms,
 * 2 strikes); launch deadlines that override the fixture's (default: fastLaunch in daemon-fixture.ts).
 */
export async function startLabWorld(
  hosts: number,
  options: { layers: number; hidden?: number; restartBudget: number; cutOffGraceSeconds?: number; monitor?: MonitorTimings; launch?: LaunchTimings },
): Promise<LabWorld> {
  const { lab, world } = await startLabWorldWithoutDaemon(hosts, options);
  try {
    const daemon = await startInProcessDaemon(world, 60_000, options.monitor ?? {}, options.launch ?? {});
    return { lab, world, daemon };
  } catch (error) {
    await world.close();
    await lab.close();
    throw error;
  }
}

/** The lab and its daemon world, settings written, no daemon started: for a test that runs `shardctl daemon` processes of its own. */
export async function startLabWorldWithoutDaemon(
  hosts: number,
  options: { layers: number; hidden?: number; restartBudget: number; cutOffGraceSeconds?: number },
): Promise<Omit<LabWorld, "daemon">> {
  const lab = await startLab(hosts);
  let world: DaemonWorld | undefined;
  try {
    world = await startWorld({ layers: options.layers, ...(options.hidden === undefined ? {} : { hidden: options.hidden }) });
    world.sshd = lab.sshd;
    for (const [i, node] of lab.sshd.nodes.entries()) world.hosts.set(`n${i + 1}`, node.host);
    await writeSettings(world, {
      router: true,
      restartBudget: options.restartBudget,
      ...(options.cutOffGraceSeconds === undefined ? {} : { cutOffGraceSeconds: options.cutOffGraceSeconds }),
    });
    return { lab, world };
  } catch (error) {
    await world?.close();
    await lab.close();
    throw error;
  }
}

/**
 * Take down what startLabWorld began (any part may be missing after a failed start): heal `cutOff`
 * (what is cut off must be reachable for the daemon's own prune), prune `cluster` the daemon's way
 * (its definition removed, waited for up to `pruneMs`), stop the daemon, then the lab and the world.
 * Returns what was still there before the lab went down — engine pids (killed here) and ledger
 * entries — for the test to find empty.
 */
export async function closeLabWorld(
  { lab, world, daemon }: { lab?: Lab | undefined; world?: DaemonWorld | undefined; daemon?: Pick<Daemon, "stop"> | undefined },
  cluster: string,
  options: { cutOff?: LabHost | undefined; pruneMs?: number } = {},
): Promise<{ engines: number[]; ledger: string[] }> {
  await options.cutOff?.heal().catch(() => undefined);
  if (world !== undefined) await removeDefinition(world, cluster, options.pruneMs ?? 30_000).catch(() => undefined);
  await daemon?.stop();
  const engines = world === undefined ? [] : await enginePids(world);
  const ledger = world === undefined ? [] : await ledgerNames(world);
  // Whatever a failed test left dies with its namespace, or by pid here.
  await lab?.close();
  killPids(engines);
  await world?.close();
  return { engines, ledger };
}
