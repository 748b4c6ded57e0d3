/**
 * Addresses for tests and benchmarks: loopback hosts that belong to one process at a time, and free
 * ports on them. No vitest imports (bench/ uses it too, through the fixtures).
 *
 * Why: vitest runs test files side by side in worker processes, several people may run vitest (or a
 * bench) on this machine at once, and Linux routes all of 127.0.0.0/8 to `lo`. Two files that pick
 * 127.0.0.N by hand and bind the same port on it collide, and a test that expects a port on "its"
 * address to be free or closed is wrong the moment another file uses that address. So no fixture
 * names an address; each asks `allocateHost()` for one nobody else holds.
 *
 * How: a host is leased by binding a UDP socket to `<host>:leasePort` (no SO_REUSEADDR, no
 * SO_REUSEPORT). The kernel lets exactly one socket hold an address and port, so that bind is an
 * atomic test-and-set across every process on the machine: every vitest worker, a second vitest run,
 * a bench. Whoever binds first owns the host; everybody else gets EADDRINUSE and tries the next one.
 * The kernel also ends the lease when the process ends, however it ends, so a worker killed on a
 * timeout leaves nothing stale behind. UDP, so the lease never occupies a TCP port a test might want
 * and nothing can connect to it; the socket is unref'd, so it never keeps a process alive.
 *
 * Why not the alternatives:
 * - vitest's worker id (VITEST_POOL_ID) with a per-file counter is unique only inside one vitest run:
 *   two runs at once both have worker 1, a bench has no worker id, and a counter that restarts with
 *   every file hands the next file in a worker addresses that leaked processes of the last one may
 *   still hold.
 * - lock files created with O_EXCL in the OS temp dir are atomic too, but a killed worker leaves its
 *   file behind; telling a stale lock from a live one needs a pid check, and reclaiming one races with
 *   another process reclaiming it.
 *
 * Hosts come from 127.0.0.2–127.0.0.254 (never 127.0.0.1, which stays "localhost" for tests that
 * mean it), then 127.0.1.1 onward when those are all taken. A host stays leased until the process
 * exits or `releaseHosts()` is called: a test file's hosts are its own for the whole file.
 */
import { createSocket, type Socket } from "node:dgram";

export { freePort, freePortRun } from "./free-ports.js";

/** The UDP port whose binding on a host is the lease of that host (outside Linux's ephemeral range). */
export const leasePort = 19_991;

const leases = new Map<string, Socket>();
// Where this process's next search starts: hosts before it are ours already or were taken.
let cursor = 0;

/** A loopback address no other process (and no earlier call in this one) holds, leased until exit. */
export async function allocateHost(): Promise<string> {
  for (;;) {
    // Claim the candidate before awaiting, so concurrent calls in this process try different ones.
    const host = candidate(cursor++);
    if (host === undefined) throw new Error("no loopback address left to lease in 127.0.0.2-127.0.255.254");
    const socket = await tryLease(host);
    if (socket !== undefined) {
      leases.set(host, socket);
      return host;
    }
  }
}

/** `count` distinct leased loopback addresses. */
export async function allocateHosts(count: number): Promise<string[]> {
  const hosts: string[] = [];
  for (let i = 0; i < count; i++) hosts.push(await allocateHost());
  return hosts;
}

/** The hosts this process holds. */
export function leasedHosts(): string[] {
  return [...leases.keys()];
}

/** Give back every host this process holds (optional: process exit does it too). */
export function releaseHosts(): void {
  for (const socket of leases.values()) socket.close();
  leases.clear();
}

/** The i-th address tried: 127.0.0.2..254, then 127.0.1.1..254, 127.0.2.1..254, … */
function candidate(i: number): string | undefined {
  if (i < 253) return `127.0.0.${i + 2}`;
  const rest = i - 253;
  const third = 1 + Math.floor(rest / 254);
  return third > 255 ? undefined : `127.0.${third}.${(rest % 254) + 1}`;
}

function tryLease(host: string): Promise<Socket | undefined> {
  return new Promise((resolve, reject) => {
    const socket = createSocket({ type: "udp4", reuseAddr: false });
    socket.once("error", (error: NodeJS.ErrnoException) => {
      try {
        socket.close();
      } catch {
        // never bound: nothing to close
      }
      if (error.code === "EADDRINUSE") resolve(undefined);
      else reject(new Error(`cannot lease loopback address ${host} (udp port ${leasePort}): ${error.message}; tests need all of 127.0.0.0/8 on lo, as Linux has it`));
    });
    socket.bind({ address: host, port: leasePort, exclusive: true }, () => {
      socket.unref();
      resolve(socket);
    });
  });
}
