/**
 * Free loopback ports for tests and benchmarks that run side by side: one ephemeral port, or a run
 * of consecutive ports free on every given host, from a random region. No vitest imports (bench uses it).
 */
import { createServer, type AddressInfo } from "node:net";

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

/** The first of `width` consecutive ports free on every host. */
export async function freePortRun(hosts: readonly string[], width: number): Promise<number> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const first = 20_000 + Math.floor(Math.random() * 30_000);
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
