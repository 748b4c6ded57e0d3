/**
 * The host of the coordinator's control address (its `hybrid` node in the engine's cluster TOML).
 *
 * mlxcel's coordinator binds that address for its transport, and every request it sends a stage
 * carries the listener's own address as the reply address: stage 0 dials it with the result of each
 * run, every stage with its acknowledgements. So it must be an address of the coordinator's machine
 * that the stages reach — its node's address, as for a stage — and never the HTTP listener's
 * `[coordinator] host`, which is 127.0.0.1 by default (a remote stage would dial its own loopback)
 * or a wildcard such as 0.0.0.0 (which a stage cannot dial either).
 */
import { createSocket } from "node:dgram";
import { isIP } from "node:net";
import type { NodeAccess } from "../nodes/index.js";
import { ShardctlError } from "../errors/index.js";
import { engineAddressOf } from "./engine-address.js";

/**
 * `nodeHost` is the address the coordinator's node binds as a stage would (loopback for a local
 * node); `stageHosts` the addresses the stages bind. A local coordinator (the control machine, or a
 * `host = "local"` node) with a stage on another machine has no registry address: it gets the
 * address this machine sends from towards that stage, the one the stage's replies come back to.
 */
export async function controlHostOf(coordinator: NodeAccess, nodeHost: string, stageHosts: readonly string[]): Promise<string> {
  if (coordinator.config.host !== "local") return nodeHost;
  const remote = stageHosts.find((host) => !isLoopbackHost(host));
  if (remote === undefined) return nodeHost;
  let source: string;
  try {
    source = await sourceAddressTowards(remote);
  } catch (error) {
    throw new ShardctlError(
      "NodeAddressUnresolved",
      `the coordinator runs on this machine and a stage on ${remote}, but this machine has no route to ${remote} (${(error as Error).message}): the stages could not reach the coordinator's control address`,
      { cause: error },
    );
  }
  return engineAddressOf(coordinator.config.name, source);
}

/** Whether `host` (an address, or the name "localhost") is this machine's loopback. */
export function isLoopbackHost(host: string): boolean {
  return host === "::1" || host === "localhost" || (isIP(host) === 4 && host.startsWith("127."));
}

/** The local address the kernel picks to reach `host`: a connected UDP socket sends nothing. */
function sourceAddressTowards(host: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = createSocket(isIP(host) === 6 ? "udp6" : "udp4");
    socket.once("error", (error) => {
      socket.close();
      reject(error);
    });
    // Any port does: nothing is sent, the route alone decides the source address.
    socket.connect(9, host, () => {
      const { address } = socket.address();
      socket.close();
      resolve(address);
    });
  });
}
