/**
 * Under a low open-file limit the dashboard takes fewer connections (an eighth of the limit), and
 * the event streams never take them all: under `ulimit -n 1024` (128 connections) a page past the
 * 64th stream is answered 503 DashboardBusy with Retry-After, not cut off, and a script's JSON
 * request still answers. With 256 streams allowed whatever the limit, the 129th page was reset and
 * every JSON poller refused.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { connect, type Socket } from "node:net";
import { afterAll, beforeAll, expect, test } from "vitest";
import { requireBuild, repoRoot } from "../cli/support/run-shardctl.js";

let child: ChildProcess | undefined;
let url: URL;
const sockets: Socket[] = [];

// The dashboard of dist, over an empty status feed, in a process whose open-file limit is 1024.
const script = `
const { startDashboard } = await import(${JSON.stringify(`${repoRoot}dist/src/dashboard/index.js`)});
const { StatusFeed } = await import(${JSON.stringify(`${repoRoot}dist/src/reconciler/index.js`)});
const { pino } = await import("pino");
const dashboard = await startDashboard({
  address: "127.0.0.1:0", token: undefined, log: pino({ level: "silent" }),
  source: { feed: new StatusFeed(), readStatuses: async () => [], clusterNames: async () => [], hasCluster: async () => false,
    requestReconcile: async () => false, previewPlan: async () => { throw new Error("none"); } },
});
console.log(dashboard.url);
`;

beforeAll(async () => {
  requireBuild();
  child = spawn("sh", ["-c", 'ulimit -n 1024 && exec "$0" --input-type=module -e "$1"', process.execPath, script], {
    cwd: repoRoot,
    stdio: ["ignore", "pipe", "inherit"],
  });
  url = new URL(
    await new Promise<string>((resolve, reject) => {
      child!.stdout!.once("data", (d: Buffer) => resolve(d.toString().trim()));
      child!.once("exit", (code) => reject(new Error(`the dashboard process exited ${code}`)));
    }),
  );
});
afterAll(() => {
  for (const socket of sockets) socket.destroy();
  child?.kill("SIGKILL");
});

/** Opens the event stream on a raw connection (kept open) and gives its status line, or how it ended. */
function openStream(): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect(Number(url.port), url.hostname, () => socket.write(`GET /api/events HTTP/1.1\r\nHost: ${url.host}\r\n\r\n`));
    sockets.push(socket);
    let head = "";
    socket.on("data", (d: Buffer) => {
      head += d.toString();
      const line = head.split("\r\n")[0];
      if (head.includes("\r\n")) resolve(line!.includes("503") ? `503 retry-after ${/retry-after: (\d+)/i.exec(head)?.[1] ?? "-"}` : line!);
    });
    socket.on("error", (error) => resolve(`error ${(error as NodeJS.ErrnoException).code}`));
    socket.on("close", () => resolve("closed"));
  });
}

test("under ulimit -n 1024: 64 streams, the next are 503 with Retry-After, and JSON still answers", async () => {
  const answers: string[] = [];
  for (let i = 0; i < 70; i++) answers.push(await openStream());
  expect(
    answers.slice(0, 64).every((a) => a === "HTTP/1.1 200 OK"),
    answers.join(", "),
  ).toBe(true);
  expect(answers.slice(64)).toEqual(Array.from({ length: 6 }, () => "503 retry-after 5"));
  const json = await fetch(new URL("/api/clusters", url));
  expect(json.status).toBe(200);
});
