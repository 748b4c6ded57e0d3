/**
 * A TCP proxy on 127.0.0.1 for tests of a connection that dies silently: `freeze()` stops carrying
 * bytes on every connection open at that moment, in both directions, without closing any (as a NAT
 * or a proxy that dropped its entry, or a laptop that slept while its peer gave up, leaves it),
 * while new connections are carried as before. With `delayMs`, a slow link: every byte is carried
 * that long after it arrived, each way, in order (a round trip of twice that). No vitest imports.
 */
import { createConnection, createServer, type Socket } from "node:net";
import type { AddressInfo } from "node:net";

export interface TcpProxy {
  /** The proxy's port on 127.0.0.1. */
  port: number;
  /** Stop carrying bytes on the connections open now; they stay open. */
  freeze(): void;
  close(): Promise<void>;
}

export async function startTcpProxy(targetHost: string, targetPort: number, options: { delayMs?: number } = {}): Promise<TcpProxy> {
  const pairs = new Set<[Socket, Socket]>();
  const server = createServer((client) => {
    const upstream = createConnection({ host: targetHost, port: targetPort });
    const pair: [Socket, Socket] = [client, upstream];
    pairs.add(pair);
    const delayMs = options.delayMs ?? 0;
    if (delayMs > 0) {
      carryLate(client, upstream, delayMs);
      carryLate(upstream, client, delayMs);
    } else {
      client.pipe(upstream);
      upstream.pipe(client);
    }
    const end = (): void => {
      pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on("error", end).on("close", end);
    upstream.on("error", end).on("close", end);
  });
  await new Promise<void>((resolve) => server.listen({ host: "127.0.0.1", port: 0 }, resolve));
  const frozen: Socket[] = [];
  return {
    port: (server.address() as AddressInfo).port,
    freeze() {
      for (const [client, upstream] of pairs) {
        client.unpipe(upstream);
        upstream.unpipe(client);
        // Read and drop what still comes, so neither peer sees a full window or an end.
        client.removeAllListeners("close").on("data", () => undefined);
        upstream.removeAllListeners("close").on("data", () => undefined);
        frozen.push(client, upstream);
      }
      pairs.clear();
    },
    close: async () => {
      for (const socket of frozen) socket.destroy();
      for (const [client, upstream] of pairs) {
        client.destroy();
        upstream.destroy();
      }
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** Carry what `from` sends to `to` `delayMs` later (timers of one delay fire in order), its end too. */
function carryLate(from: Socket, to: Socket, delayMs: number): void {
  from.on("data", (chunk: Buffer) => setTimeout(() => !to.destroyed && to.write(chunk), delayMs));
  from.on("end", () => setTimeout(() => !to.destroyed && to.end(), delayMs));
}
