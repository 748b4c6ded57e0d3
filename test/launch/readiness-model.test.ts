/**
 * The launch's one-token probe sends no `model` (engines differ in the name they serve); an engine
 * that refuses a request without one (400, 404 or 422 naming it) is asked once more, naming the
 * model it serves. A real HTTP server on loopback stands in for such an engine's coordinator.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, expect, test } from "vitest";
import { engineOf } from "../../src/engines/index.js";
import { probeOneToken } from "../../src/launch/index.js";
import { allocateHost } from "../support/test-world.js";

let server: Server;
let url: string;
const asked: Array<string | undefined> = [];

beforeAll(async () => {
  const host = await allocateHost();
  server = createServer((req, res) => {
    let body = "";
    req.on("data", (d: Buffer) => (body += d.toString()));
    req.on("end", () => {
      const model = (JSON.parse(body) as { model?: string }).model;
      asked.push(model);
      if (model === undefined) return void res.writeHead(400).end('{"error":"missing field `model`"}');
      if (model !== "org/served") return void res.writeHead(404).end(`{"error":"model ${model} not found"}`);
      res.writeHead(200, { "content-type": "application/json" }).end('{"choices":[{"text":"x"}]}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  url = `http://${host}:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await new Promise((resolve) => server.close(resolve));
});

test("an engine that wants the model named is asked again with the name it serves; once only", async () => {
  const readiness = engineOf("mlxcel").readiness;
  asked.length = 0;
  await probeOneToken(url, readiness, 5_000, undefined, "org/served");
  expect(asked).toEqual([undefined, "org/served"]);

  asked.length = 0;
  await expect(probeOneToken(url, readiness, 5_000, undefined, "org/other")).rejects.toThrow(/answered 404: \{"error":"model org\/other not found"\}/);
  expect(asked).toEqual([undefined, "org/other"]);

  asked.length = 0;
  await expect(probeOneToken(url, readiness, 5_000)).rejects.toThrow(/answered 400: \{"error":"missing field `model`"\}/);
  expect(asked).toEqual([undefined]);
});
