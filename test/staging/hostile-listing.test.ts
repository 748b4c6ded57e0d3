/**
 * A Hub whose tree listing is not a listing: a body sent without end is refused once 64 MiB arrived
 * (not held until the deadline), and a body that is not JSON (a proxy's error page answered 200)
 * is an error naming the URL and showing how the body begins. Real HTTP servers on loopback.
 */
import { createServer, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { fetchHubManifest, maxListingBytes } from "../../src/staging/index.js";
import { allocateHost } from "../support/test-world.js";

const commit = "0123456789abcdef0123456789abcdef01234567";
let server: Server | undefined;

afterEach(async () => {
  server?.closeAllConnections();
  await new Promise<void>((resolve) => (server === undefined ? resolve() : server.close(() => resolve())));
  server = undefined;
});

/** Serve every request with `answer`; the endpoint. */
async function serve(answer: (res: ServerResponse) => void): Promise<string> {
  const host = await allocateHost();
  server = createServer((_req, res) => answer(res));
  await new Promise<void>((resolve) => server!.listen(0, host, resolve));
  return `http://${host}:${(server.address() as AddressInfo).port}`;
}

describe("a tree listing that is not one", () => {
  it("a listing sent without end: HubListingInvalid (terminal) once 64 MiB arrived, naming the URL; the body is cancelled", async () => {
    let sent = 0;
    let closed = false;
    const endpoint = await serve((res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.write("[");
      const entry = JSON.stringify({ type: "directory", oid: "0".repeat(40), size: 0, path: "d".repeat(200) }) + ",";
      const chunk = Buffer.from(entry.repeat(4000));
      const pump = (): void => {
        while (!res.destroyed && res.write(chunk)) sent += chunk.length;
        if (!res.destroyed) res.once("drain", pump);
      };
      res.on("close", () => (closed = true));
      pump();
    });
    const started = Date.now();
    const error = await fetchHubManifest({ endpoint, repo: "org/endless", revision: commit, deadlineMs: 20_000 }).catch((e: unknown) => e);
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(error).toMatchObject({ reason: "HubListingInvalid", terminal: true });
    expect((error as Error).message).toBe(
      `${endpoint}/api/models/org/endless/tree/${commit}?recursive=true: the listing of org/endless is over ${maxListingBytes} bytes (64 MiB), far more than a model repository's; nothing is staged from it: check the endpoint`,
    );
    await expect.poll(() => closed, { timeout: 5000 }).toBe(true);
    expect(sent).toBeLessThan(2 * maxListingBytes);
  });

  it("a listing that is an HTML page: HubError naming the URL, with the page's beginning (its control characters escaped)", async () => {
    const endpoint = await serve((res) => res.writeHead(200, { "content-type": "text/html" }).end("<html>\u001b[31mproxy error</html>"));
    const error = await fetchHubManifest({ endpoint, repo: "org/page", revision: commit }).catch((e: unknown) => e);
    expect(error).toMatchObject({ reason: "HubError" });
    const message = (error as Error).message;
    expect(message).toMatch(
      new RegExp(`^${endpoint.replace(/[.]/g, "\\.")}/api/models/org/page/tree/${commit}\\?recursive=true: the listing of org/page is not JSON \\(`),
    );
    expect(message).toContain('it begins "<html>\\u001b[31mproxy error</html>"');
    expect(message).not.toContain("\u001b");
  });

  it("a listing cut short mid-body: HubError naming the URL", async () => {
    const endpoint = await serve((res) => res.writeHead(200, { "content-type": "application/json" }).end('[{"type": "file", "path": "config.js'));
    const error = await fetchHubManifest({ endpoint, repo: "org/cut", revision: commit }).catch((e: unknown) => e);
    expect(error).toMatchObject({ reason: "HubError" });
    expect((error as Error).message).toContain(`/api/models/org/cut/tree/${commit}?recursive=true: the listing of org/cut is not JSON`);
  });
});

describe("a listing of names no model has", () => {
  const file = (path: string) => ({ type: "file", oid: "a".repeat(40), size: 1, path });
  const listing = (entries: object[]) => async () => serve((res) => res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(entries)));

  // Regression: 60 names 20,000 folders deep (2.4 MB) held the daemon's event loop for minutes,
  // each folder of each name compared with every listed name.
  it("names thousands of folders deep, or past 1024 bytes: UnsafeFileName (terminal) at once, naming the listing", async () => {
    const deep = Array.from({ length: 60 }, (_, i) => file(`${"a/".repeat(20_000)}f${i}`));
    const endpoint = await listing(deep)();
    const error = await fetchHubManifest({ endpoint, repo: "org/deep", revision: commit }).catch((e: unknown) => e);
    expect(error).toMatchObject({ reason: "UnsafeFileName", terminal: true });
    expect((error as Error).message).toMatch(/which is over 1024 bytes long; refusing to stage it$/);

    server?.closeAllConnections();
    await new Promise<void>((resolve) => server!.close(() => resolve()));
    const endpoint2 = await listing([file(`${"d/".repeat(33)}model.safetensors`)])();
    const error2 = await fetchHubManifest({ endpoint: endpoint2, repo: "org/deep", revision: commit }).catch((e: unknown) => e);
    expect(error2).toMatchObject({ reason: "UnsafeFileName" });
    expect((error2 as Error).message).toMatch(/which lies more than 32 folders deep; refusing to stage it$/);
  });

  it("a name that is a file and the folder of another, in either order: HubListingInvalid naming both", async () => {
    for (const entries of [
      [file("a.json"), file("x/y"), file("a.json/b.json")],
      [file("a.json/b.json"), file("x/y"), file("a.json")],
    ]) {
      const endpoint = await listing(entries)();
      const error = await fetchHubManifest({ endpoint, repo: "org/both", revision: commit }).catch((e: unknown) => e);
      expect(error).toMatchObject({ reason: "HubListingInvalid" });
      expect((error as Error).message).toContain('lists "a.json" as a file and as the folder of "a.json/b.json"');
      server?.closeAllConnections();
      await new Promise<void>((resolve) => server!.close(() => resolve()));
      server = undefined;
    }
  });
});
