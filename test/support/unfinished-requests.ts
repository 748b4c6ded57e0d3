/**
 * Clients that open a connection, send the start of a request head and never finish it: what a
 * server's connection limits are tested with. Each one reads what the server sends (its 408), or
 * the socket would never see its end.
 */
import { connect, type Socket } from "node:net";

export interface UnfinishedRequest {
  socket: Socket;
  /** Resolves with the time (Date.now()) the server closed it, or dropped it before it connected. */
  closed: Promise<number>;
}

/** Open `count` connections to `url`, each sending `requestLine` and one header and nothing more. */
export function openUnfinishedRequests(url: URL, count: number, requestLine: string): Promise<UnfinishedRequest[]> {
  return Promise.all(Array.from({ length: count }, () => openOne(url, requestLine)));
}

function openOne(url: URL, requestLine: string): Promise<UnfinishedRequest> {
  return new Promise((resolve) => {
    const socket = connect(Number(url.port), url.hostname);
    const closed = new Promise<number>((done) => socket.once("close", () => done(Date.now())));
    socket.on("error", () => undefined);
    socket.resume();
    socket.once("connect", () => {
      socket.write(`${requestLine}\r\nHost: ${url.host}\r\n`);
      resolve({ socket, closed });
    });
    socket.once("close", () => resolve({ socket, closed }));
  });
}

/** How many of `requests` the server has closed `ms` from now (those closed already included). */
export async function closedWithin(requests: readonly UnfinishedRequest[], ms: number): Promise<number> {
  let count = 0;
  for (const r of requests) void r.closed.then(() => count++);
  await new Promise((resolve) => setTimeout(resolve, ms));
  return count;
}
