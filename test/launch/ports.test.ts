import { createServer, type Server } from "node:net";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { allocatePorts } from "../../src/launch/ports.js";
import { isShardctlError } from "../../src/errors/index.js";
import { connect } from "node:net";
import { allocateHosts } from "../support/test-world.js";

// Two loopback addresses no other test file uses: the ports next to `busy` must stay free meanwhile.
let hostA: string;
let hostB: string;
beforeAll(async () => {
  [hostA, hostB] = (await allocateHosts(2)) as [string, string];
});

// A real TCP connect, as the node probe does it.
function accepts(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    socket.once("connect", () => {
      socket.destroy();
      resolve(true);
    });
    socket.once("error", () => resolve(false));
  });
}

const servers: Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))));
});

async function listenAnywhere(host: string): Promise<number> {
  const server = createServer();
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  const address = server.address();
  if (address === null || typeof address === "string") throw new Error("no address");
  return address.port;
}

describe("allocatePorts", () => {
  it("skips a port something listens on, and ports other clusters hold", async () => {
    const busy = await listenAnywhere(hostA);
    const range = { first: busy, last: busy + 5 };
    const ports = await allocatePorts(
      range,
      [
        { label: "stage-0", host: hostA },
        { label: "stage-1", host: hostB },
        { label: "coordinator", host: hostA },
      ],
      [{ host: hostA, port: busy + 1, holder: "cluster other (stage-0)" }],
      accepts,
    );
    expect(ports).toEqual([busy + 2, busy, busy + 3]);
  });

  it("names the range and who holds it when exhausted", async () => {
    const busy = await listenAnywhere(hostA);
    const error = await allocatePorts(
      { first: busy, last: busy + 1 },
      [{ label: "stage-0 on n1", host: hostA }],
      [{ host: hostA, port: busy + 1, holder: "cluster llama (stage-1)" }],
      accepts,
    ).catch((e: unknown) => e);
    expect(isShardctlError(error, "PortRangeExhausted")).toBe(true);
    expect((error as Error).message).toBe(
      `no free port for stage-0 on n1 in ${busy}-${busy + 1} on ${hostA}: held by ${busy} (in use on ${hostA}), ` +
        `${busy + 1} (cluster llama (stage-1)); widen [transport] port_range or stop a cluster that holds them`,
    );
  });
});
