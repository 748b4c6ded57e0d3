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

describe("addresses at once", () => {
  it("each address's requests are probed in turn while the addresses are probed at once, with the same ports as one at a time", async () => {
    const hosts = ["10.0.0.1", "10.0.0.2", "10.0.0.3"];
    const requests = hosts.flatMap((host) => [0, 1, 2].map((i) => ({ label: `stage-${i} on ${host}`, host })));
    let inFlight = 0;
    let most = 0;
    const perHost = new Map<string, number>();
    let sameHostAtOnce = false;
    // Port 40001 is in use on every address; the probes answer after a pause, as a node's do.
    const isInUse = async (host: string, port: number): Promise<boolean> => {
      inFlight += 1;
      most = Math.max(most, inFlight);
      perHost.set(host, (perHost.get(host) ?? 0) + 1);
      if (perHost.get(host)! > 1) sameHostAtOnce = true;
      await new Promise((r) => setTimeout(r, 20));
      perHost.set(host, perHost.get(host)! - 1);
      inFlight -= 1;
      return port === 40001;
    };
    const ports = await allocatePorts({ first: 40000, last: 40009 }, requests, [{ host: "10.0.0.2", port: 40000, holder: "cluster other" }], isInUse);
    expect(ports).toEqual([40000, 40002, 40003, 40002, 40003, 40004, 40000, 40002, 40003]);
    expect(most).toBe(3);
    expect(sameHostAtOnce).toBe(false);
  });

  it("a range exhausted on two addresses names the first request in order", async () => {
    const requests = [
      { label: "stage-0 on a", host: "10.0.0.1" },
      { label: "stage-1 on b", host: "10.0.0.2" },
    ];
    // The second address runs out first in time; the first request is still the one named.
    const isInUse = async (host: string): Promise<boolean> => {
      await new Promise((r) => setTimeout(r, host === "10.0.0.1" ? 50 : 1));
      return true;
    };
    const failed = await allocatePorts({ first: 40000, last: 40001 }, requests, [], isInUse).catch((e: unknown) => e as Error);
    expect((failed as Error).message).toMatch(/^no free port for stage-0 on a in 40000-40001 on 10\.0\.0\.1/);
  });
});
