/**
 * Port allocation from a cluster's transport range. Ports are keyed by the address a process
 * binds (two registry nodes on one machine share its ports), skip ports held by other clusters
 * (the ledger) and ports something already listens on (probed on that node).
 */
import { ShardctlError } from "../errors/index.js";

export interface PortRange {
  first: number;
  last: number;
}

export interface PortRequest {
  /** Who asks, for messages: e.g. `stage-0 on studio-1`. */
  label: string;
  /** The address the process will bind; ports are unique per address. */
  host: string;
}

export interface PortHolder {
  host: string;
  port: number;
  /** Who holds it, for the exhausted-range message: e.g. `cluster llama (stage-1)`. */
  holder: string;
}

/** The chain of this process's port allocations (see `oneAllocationAtATime`). */
let allocations: Promise<unknown> = Promise.resolve();

/**
 * Run `work` (choose a launch's ports and record them in the ledger) after every allocation this
 * process began before it. Two clusters launching at once (a daemon starting beside several
 * definitions, one commit starting two) would otherwise both see the same ports free, both take
 * them, and break each other's launch; recorded before the next one looks, they are held.
 */
export function oneAllocationAtATime<T>(work: () => Promise<T>): Promise<T> {
  const run = allocations.then(work, work);
  allocations = run.catch(() => undefined);
  return run;
}

/**
 * Give each request a port from `range`, in request order per address, never two the same on one
 * address. `isInUse(host, port)` probes whether something already holds it there. Addresses are
 * independent (ports are unique per address), so each address's requests are served in turn while
 * the addresses are served at once: a cluster of twelve nodes once spent 2.6 s probing them one
 * after another. A range exhausted on several addresses is reported for the first request in order.
 */
export async function allocatePorts(
  range: PortRange,
  requests: readonly PortRequest[],
  held: readonly PortHolder[],
  isInUse: (host: string, port: number) => Promise<boolean>,
): Promise<number[]> {
  const taken = new Map<string, Map<number, string>>();
  const take = (host: string, port: number, holder: string): void => {
    const ports = taken.get(host) ?? new Map<number, string>();
    ports.set(port, holder);
    taken.set(host, ports);
  };
  for (const h of held) take(h.host, h.port, h.holder);

  const choose = async (request: PortRequest): Promise<number> => {
    const busy: string[] = [];
    for (let port = range.first; port <= range.last; port++) {
      const holder = taken.get(request.host)?.get(port);
      if (holder !== undefined) {
        busy.push(`${port} (${holder})`);
      } else if (await isInUse(request.host, port)) {
        busy.push(`${port} (in use on ${request.host})`);
      } else {
        // Named as this launch's own in a later request's message: "43702 (stage-0 on n1)" read as
        // another cluster's holder.
        take(request.host, port, `this launch's ${request.label}`);
        return port;
      }
    }
    throw new ShardctlError(
      "PortRangeExhausted",
      `no free port for ${request.label} in ${range.first}-${range.last} on ${request.host}: ` +
        `held by ${summarise(busy)}; widen [transport] port_range or stop a cluster that holds them`,
    );
  };
  const result: Array<number | undefined> = requests.map(() => undefined);
  const failures: Array<unknown> = requests.map(() => undefined);
  const hosts = [...new Set(requests.map((r) => r.host))];
  await Promise.all(
    hosts.map(async (host) => {
      for (const [i, request] of requests.entries()) {
        if (request.host !== host) continue;
        try {
          result[i] = await choose(request);
        } catch (error) {
          failures[i] = error;
          return;
        }
      }
    }),
  );
  const failed = failures.find((f) => f !== undefined);
  if (failed !== undefined) throw failed;
  return result as number[];
}

function summarise(busy: string[]): string {
  return busy.length <= 6 ? busy.join(", ") : `${busy.slice(0, 6).join(", ")} and ${busy.length - 6} more`;
}
