/**
 * The world of the fault tests and the fault bench: a lab of namespaced stage hosts (n1…nN, see
 * netns.ts), a daemon world whose nodes are those hosts, with the embedded router, and its daemon in
 * this process at the production health timings (nothing sped up). A start that fails midway
 * takes down what it began. No vitest imports.
 */
import type { Daemon } from "../../../src/reconciler/index.js";
import { startInProcessDaemon, startWorld, writeSettings, type DaemonWorld } from "../../reconciler/daemon-fixture.js";
import { startLab, type Lab } from "./netns.js";

export interface LabWorld {
  lab: Lab;
  world: DaemonWorld;
  daemon: Daemon;
}

/** `hosts` stage hosts; a test model of `layers` layers; the daemon's restart budget per revision. */
export async function startLabWorld(hosts: number, options: { layers: number; restartBudget: number }): Promise<LabWorld> {
  const lab = await startLab(hosts);
  let world: DaemonWorld | undefined;
  try {
    world = await startWorld({ layers: options.layers });
    world.sshd = lab.sshd;
    for (const [i, node] of lab.sshd.nodes.entries()) world.hosts.set(`n${i + 1}`, node.host);
    await writeSettings(world, { router: true, restartBudget: options.restartBudget });
    const daemon = await startInProcessDaemon(world, 60_000, {});
    return { lab, world, daemon };
  } catch (error) {
    await world?.close();
    await lab.close();
    throw error;
  }
}
