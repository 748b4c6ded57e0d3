/**
 * The engine's words about an IPv6 peer write its address as URLs and OpenSSH do, in brackets
 * (`[::1]:7001`): unbracketed, `::1:7001` reads as an address with no port.
 */
import { createServer, type AddressInfo } from "node:net";
import { expect, test } from "vitest";
import { acceptLink, dialLink, dialLinkUntil, joinHostPort } from "../../src/engine/transport/index.js";
import { freePort } from "../support/free-ports.js";

test("host:port: IPv6 in brackets, IPv4 and names as they are", () => {
  expect(joinHostPort("::1", 7001)).toBe("[::1]:7001");
  expect(joinHostPort("fd42:a5a::11", 22)).toBe("[fd42:a5a::11]:22");
  expect(joinHostPort("127.0.0.2", 7001)).toBe("127.0.0.2:7001");
  expect(joinHostPort("gpu-box", 7001)).toBe("gpu-box:7001");
});

test("a dial to an IPv6 peer that refuses, and to one that wants a token, names it bracketed", async () => {
  const refused = await freePort("::1");
  await expect(dialLinkUntil("::1", refused, { role: "coordinator", nodeId: "c" }, undefined, performance.now() + 300, 100)).rejects.toThrow(
    new RegExp(`^\\[::1\\]:${refused} did not answer before the deadline \\(connect ECONNREFUSED ::1:${refused}\\)$`),
  );
  // A stage on ::1 that holds a transport token, dialled without one: its challenge says so.
  const server = createServer((socket) => void acceptLink(socket, "stage-0", Buffer.from("the-token")).catch(() => socket.destroy()));
  await new Promise<void>((resolve) => server.listen(0, "::1", resolve));
  const port = (server.address() as AddressInfo).port;
  try {
    await expect(dialLink("::1", port, { role: "coordinator", nodeId: "c" }, undefined, 1_000)).rejects.toThrow(
      `[::1]:${port} requires a transport token (--transport-token-file)`,
    );
  } finally {
    server.close();
  }
});
