/**
 * Server-Sent Events to the page: one frame text per event, written to every connected client. A
 * client that stops reading (its socket buffer past 1 MiB) is dropped rather than buffered for
 * ever. A `beat` event every `heartbeatMs` keeps idle connections from being cut by proxies, shows
 * a dead peer, and tells the page the daemon still runs: a stopped or hung daemon keeps its
 * connections open and sends nothing, which only the missing beats reveal. The browser reconnects
 * by itself after `retryMs` (1000 ms) when the stream ends.
 */
import type { ServerResponse } from "node:http";

export interface EventStreamOptions {
  /** Interval of the `beat` event, ms. Default 5000 (the daemon passes `[daemon] heartbeat_seconds`); at most 15 000. */
  heartbeatMs?: number;
  /** Bytes a client may leave unread before it is dropped. Default 1 MiB. */
  maxBufferedBytes?: number;
  /** Reconnect delay the browser is told, ms. Default 1000. */
  retryMs?: number;
  /** Streams served at once; one more is refused (a page retries). Default 256. */
  maxClients?: number;
}

/** Longest interval between two beats, ms (nginx cuts a proxied stream idle for 60 s by default). */
const maxBeatMs = 15_000;

/** One SSE frame: `event:` and a one-line JSON `data:`. */
export function frame(event: string, data: unknown): string {
  return `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;
}

export class EventStream {
  private readonly clients = new Set<ServerResponse>();
  /** Places held by streams whose first frames are being gathered (see reserve). */
  private pending = 0;
  private readonly heartbeat: NodeJS.Timeout;
  private readonly maxBufferedBytes: number;
  private readonly retryMs: number;
  /** Streams served at once. */
  readonly maxClients: number;
  /** Interval of the `beat` event, ms: the page calls the daemon silent after four without one. */
  readonly heartbeatMs: number;

  constructor(options: EventStreamOptions = {}) {
    this.maxBufferedBytes = options.maxBufferedBytes ?? 1 << 20;
    this.retryMs = options.retryMs ?? 1000;
    this.maxClients = options.maxClients ?? 256;
    // At least every 15 s whatever the daemon's heartbeat: proxies cut streams idle for a minute.
    this.heartbeatMs = Math.min(options.heartbeatMs ?? 5000, maxBeatMs);
    this.heartbeat = setInterval(() => this.send(frame("beat", {})), this.heartbeatMs);
    this.heartbeat.unref();
  }

  get size(): number {
    return this.clients.size;
  }

  /** As many streams are open, or about to be, as are served at once. */
  get full(): boolean {
    return this.clients.size + this.pending >= this.maxClients;
  }

  /**
   * Hold a place for a stream whose first frames are being gathered (an await: without the hold, a
   * burst of pages would all find room and all be attached, past maxClients). Undefined when full;
   * else the release, to call once before attach (or when the stream is not opened after all).
   */
  reserve(): (() => void) | undefined {
    if (this.full) return undefined;
    this.pending += 1;
    let held = true;
    return () => {
      if (!held) return;
      held = false;
      this.pending -= 1;
    };
  }

  /** Start a client's stream with `first` (the frames that bring it up to date), then every broadcast. */
  attach(response: ServerResponse, first: string): void {
    // A client that left while its first frames were gathered: its "close" has fired already, so
    // added now it would never be removed (nothing is buffered for a destroyed response either, so
    // the slow-reader check would not drop it).
    if (response.destroyed) return;
    response.writeHead(200, {
      "content-type": "text/event-stream; charset=utf-8",
      "cache-control": "no-store",
      connection: "keep-alive",
      "x-accel-buffering": "no",
    });
    response.socket?.setNoDelay(true);
    response.write(`retry: ${this.retryMs}\n\n${first}`);
    this.clients.add(response);
    response.once("close", () => this.clients.delete(response));
  }

  /** Write `text` (whole frames) to every client. */
  send(text: string): void {
    for (const client of this.clients) {
      if (client.writableLength > this.maxBufferedBytes) {
        this.clients.delete(client);
        client.destroy();
        continue;
      }
      client.write(text);
    }
  }

  /** End every stream (the daemon is stopping: the pages learn it at once and start reconnecting). */
  close(): void {
    clearInterval(this.heartbeat);
    for (const client of this.clients) client.end();
    this.clients.clear();
  }
}
