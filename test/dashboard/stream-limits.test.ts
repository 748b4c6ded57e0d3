/**
 * What the event stream holds for whom: a client that leaves while its first frames are gathered
 * (reading the status files takes a moment) is not kept (it was, for ever: its "close" had fired
 * before it was added, and a destroyed response buffers nothing for the slow-reader check to see),
 * and no more streams are served at once than the limit: one more is 503 DashboardBusy with
 * Retry-After (the page retries by itself). The dashboard's own server, with a source whose status
 * files take 300 ms to read.
 */
import { connect } from "node:net";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startDashboard, type Dashboard } from "../../src/dashboard/index.js";
import { StatusFeed } from "../../src/reconciler/index.js";
import { SseReader } from "./support.js";

let dashboard: Dashboard;

beforeAll(async () => {
  dashboard = await startDashboard({
    address: "127.0.0.1:0",
    token: undefined,
    log: pino({ level: "silent" }),
    stream: { maxClients: 3 },
    source: {
      feed: new StatusFeed(),
      readStatuses: () => new Promise((resolve) => setTimeout(() => resolve([]), 300)),
      clusterNames: () => Promise.resolve([]),
      hasCluster: () => Promise.resolve(false),
      requestReconcile: () => Promise.resolve(false),
      previewPlan: () => Promise.reject(new Error("no plan preview here")),
    },
  });
});
afterAll(async () => {
  await dashboard?.close();
});

/** Ask for the stream on a raw connection and hang up at once. */
function askAndLeave(): Promise<void> {
  const url = new URL(dashboard.url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(url.port), url.hostname, () => {
      socket.end(`GET /api/events HTTP/1.1\r\nHost: ${url.host}\r\n\r\n`, () => {
        socket.destroy();
        resolve();
      });
    });
    socket.on("error", reject);
  });
}

describe("the event stream's clients", () => {
  it("clients that leave while their first frames are gathered are not kept", async () => {
    await Promise.all(Array.from({ length: 20 }, () => askAndLeave()));
    // Past the 300 ms the statuses take: every one of those streams would have been attached by now.
    await new Promise((resolve) => setTimeout(resolve, 800));
    expect(dashboard.clients).toBe(0);
  });

  it("no more streams than the limit at once: one more is 503 DashboardBusy with Retry-After; a place freed is taken again", async () => {
    const url = new URL("api/events", dashboard.url).href;
    const readers = Array.from({ length: 3 }, () => new SseReader(url));
    try {
      for (const reader of readers) await reader.waitFor((e) => e.event === "hello");
      expect(dashboard.clients).toBe(3);
      const refused = await fetch(url);
      expect(refused.status).toBe(503);
      expect(refused.headers.get("retry-after")).toBe("5");
      expect(((await refused.json()) as { error: { reason: string; message: string } }).error).toMatchObject({
        reason: "DashboardBusy",
        message: "3 pages are following this daemon already, the most it serves at once; close one of them (the page retries by itself)",
      });
      readers.pop()!.close();
      await expect.poll(() => dashboard.clients, { timeout: 5000 }).toBe(2);
      const again = new SseReader(url);
      readers.push(again);
      await again.waitFor((e) => e.event === "hello");
      expect(dashboard.clients).toBe(3);
    } finally {
      for (const reader of readers) reader.close();
    }
  });

  it("a burst of pages at once still gets no more streams than the limit: the places are held while their first frames are gathered", async () => {
    await expect.poll(() => dashboard.clients, { timeout: 5000 }).toBe(0);
    const url = new URL("api/events", dashboard.url).href;
    const controllers = Array.from({ length: 10 }, () => new AbortController());
    try {
      // All ten ask before any has its statuses (they take 300 ms): each found room before the fix.
      const answers = await Promise.all(controllers.map((c) => fetch(url, { signal: c.signal })));
      expect(answers.map((a) => a.status).sort()).toEqual([200, 200, 200, 503, 503, 503, 503, 503, 503, 503]);
      expect(dashboard.clients).toBe(3);
    } finally {
      for (const c of controllers) c.abort();
    }
  });
});
