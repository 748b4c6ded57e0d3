/**
 * Free loopback ports for tests and benchmarks that run side by side: one ephemeral port, or a run
 * of consecutive ports free on every given host, from a random region. No vitest imports (bench uses it).
 */
import { readFileSync } from "node:fs";
import { createServer, type AddressInfo } from "node:net";

/**
 * Where runs of ports are drawn from: below the kernel's ephemeral range (Linux's default starts at
 * 32768), so neither a `freePort()` taken beside a run (an ephemeral port) nor an outgoing
 * connection's local port can fall inside it once it is handed out. From 10000 up: clear of the
 * well-known and commonly configured service ports.
 */
const runRegion = { first: 10_000, end: ephemeralStart() };

/** The first port of the kernel's ephemeral range (net.ipv4.ip_local_port_range); 32768 when unreadable. */
function ephemeralStart(): number {
  try {
    const first = Number(readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/)[0]);
    return Number.isInteger(first) && first > 20_000 ? first : 32_768;
  } catch {
    return 32_768;
  }
}

/** A port the kernel considers free on `host` right now. */
export function freePort(host = "127.0.0.1"): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, host, () => {
      const { port } = server.address() as AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/** The first of `width` consecutive ports free on every host, all below the ephemeral range. */
export async function freePortRun(hosts: readonly string[], width: number): Promise<number> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const first = runRegion.first + Math.floor(Math.random() * (runRegion.end - width - runRegion.first));
    let free = true;
    for (let port = first; port < first + width && free; port++) {
      for (const host of hosts) if (!(await canBind(host, port))) free = false;
    }
    if (free) return first;
  }
  throw new Error(`no run of ${width} free ports found on ${hosts.join(", ")}`);
}

function canBind(host: string, port: number): Promise<boolean> {
  return new Promise((done) => {
    const server = createServer();
    server.once("error", () => done(false));
    server.listen(port, host, () => server.close(() => done(true)));
  });
}
