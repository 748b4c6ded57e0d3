/**
 * The one question the daemon's router watch asks, against real servers on loopback: any HTTP
 * answer counts (a 503 too, and a router behind a self-signed certificate); a refused connection,
 * a server that takes the connection and never answers, and one that answers only after the
 * deadline do not, each said in words.
 */
import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { createServer as createHttpServer, type Server } from "node:http";
import { createServer as createHttpsServer } from "node:https";
import { createServer as createTcpServer, type AddressInfo, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, expect, test } from "vitest";
import { askRouter } from "../../src/router/index.js";
import { allocateHost } from "../support/test-world.js";
import { freePort } from "../support/free-ports.js";

let host: string;
let dir: string;
const closers: Array<() => void> = [];
beforeAll(async () => {
  host = await allocateHost();
  dir = await mkdtemp(join(tmpdir(), "ask-router-"));
});
afterAll(async () => {
  for (const close of closers) close();
  await rm(dir, { recursive: true, force: true });
});

async function listening(server: Server | ReturnType<typeof createTcpServer>): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  closers.push(() => server.close());
  return (server.address() as AddressInfo).port;
}

test("an answer of any status counts, over TLS with a self-signed certificate too", async () => {
  const http = await listening(createHttpServer((_req, res) => res.writeHead(503).end("no healthy backend")));
  expect(await askRouter(`http://${host}:${http}/health`, 2_000)).toBeUndefined();
  await promisify(execFile)("openssl", [
    "req",
    "-x509",
    "-newkey",
    "rsa:2048",
    "-nodes",
    "-days",
    "1",
    "-subj",
    "/CN=router",
    "-keyout",
    join(dir, "key.pem"),
    "-out",
    join(dir, "cert.pem"),
  ]);
  const tls = createHttpsServer({ key: await readFile(join(dir, "key.pem")), cert: await readFile(join(dir, "cert.pem")) }, (_req, res) => res.end("ok"));
  const https = await listening(tls as unknown as Server);
  expect(await askRouter(`https://${host}:${https}/health`, 2_000)).toBeUndefined();
});

test("refused, silent, or too late: not an answer, and said why", async () => {
  expect(await askRouter(`http://${host}:${await freePort(host)}/health`, 2_000)).toMatch(/ECONNREFUSED/);
  const held: Socket[] = [];
  const silent = createTcpServer((socket) => held.push(socket));
  closers.push(() => held.forEach((s) => s.destroy()));
  expect(await askRouter(`http://${host}:${await listening(silent)}/health`, 500)).toBe(
    "no answer within 500 ms (a router that hangs, or a network that drops its packets)",
  );
  const late = createHttpServer((_req, res) => setTimeout(() => res.end("ok"), 1_500).unref());
  expect(await askRouter(`http://${host}:${await listening(late)}/health`, 500)).toMatch(/^no answer within 500 ms/);
});
