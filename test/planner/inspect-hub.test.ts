import { createReadStream } from "node:fs";
import { readFile, rm, stat } from "node:fs/promises";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isShardctlError } from "../../src/errors/index.js";
import { planForCluster } from "../../src/cluster/index.js";
import { inspectModel, makeTestModel, type ModelProfile } from "../../src/planner/index.js";
import { parseCluster, parseSettings } from "../../src/spec/index.js";
import { startHubServer, type HubServer } from "../support/hub-server.js";
import { allocateHosts } from "../support/test-world.js";
import { layoutHeader, llamaConfig, tempDir, writeConfig, writeRawSafetensors } from "./fixtures.js";

const commit = "0123456789abcdef0123456789abcdef01234567";
let hub: HubServer;
let guarded: HubServer;
let shardedDir: string;
let singleDir: string;
let brokenDir: string;
let binDir: string;
let noTokenizerDir: string;
/** Loopback addresses leased to this file: the open Hub (and the test's own servers), the guarded one. */
let host: string;
let guardedHost: string;

beforeAll(async () => {
  [host, guardedHost] = (await allocateHosts(2)) as [string, string];
  shardedDir = await tempDir();
  await makeTestModel(shardedDir, { layers: 6, quantize: 4, shards: 3 });
  singleDir = await tempDir();
  await makeTestModel(singleDir, { layers: 3 });
  brokenDir = await tempDir();
  await writeConfig(brokenDir, llamaConfig());
  const { header } = layoutHeader([["model.layers.0.mlp.up_proj.weight", "F16", [8, 8]]]);
  await writeRawSafetensors(join(brokenDir, "model.safetensors"), header, 0, 5000n);
  noTokenizerDir = await tempDir();
  await makeTestModel(noTokenizerDir, { layers: 2 });
  await rm(join(noTokenizerDir, "tokenizer.json"));
  binDir = await tempDir();
  await writeConfig(binDir, llamaConfig());
  await writeRawSafetensors(join(binDir, "pytorch_model.bin"), "{}", 0);
  hub = await startHubServer({
    host,
    repos: [
      { repo: "test-org/sharded", commit, dir: shardedDir },
      { repo: "test-org/single", commit, dir: singleDir },
      { repo: "test-org/broken", commit, dir: brokenDir },
      { repo: "test-org/bin-only", commit, dir: binDir },
      { repo: "test-org/no-tokenizer", commit, dir: noTokenizerDir },
    ],
  });
  guarded = await startHubServer({ host: guardedHost, token: "s3cret", repos: [{ repo: "org/private", commit, dir: singleDir }] });
});

afterAll(async () => {
  await hub?.close();
  await guarded?.close();
});

/** A profile but for where it was read from, and its tokenizer: a local directory is listed for it, a Hub model's listing is its staging's. */
function withoutSource(p: ModelProfile): Omit<ModelProfile, "source" | "tokenizer"> {
  const { source: _source, tokenizer: _tokenizer, ...rest } = p;
  return rest;
}

describe("inspectModel over the Hub protocol (HTTP Range)", () => {
  it("reads a 3-shard quantized model with 2 Range requests per shard + config + index, no weights", async () => {
    hub.resetStats();
    const profile = await inspectModel({ kind: "hub", endpoint: hub.endpoint, repo: "test-org/sharded", revision: "main" });
    const stats = hub.stats();
    expect(stats.requests).toBe(3 * 2 + 2);
    const base = "/test-org/sharded/resolve/main/";
    expect(stats.requestsByPath[`${base}config.json`]).toBe(1);
    expect(stats.requestsByPath[`${base}model.safetensors.index.json`]).toBe(1);
    for (const f of profile.files) expect(stats.requestsByPath[base + f.path]).toBe(2);
    // Only headers cross the wire: 8 + N bytes per shard.
    for (const f of profile.files) expect(stats.bytesByPath[base + f.path]).toBe(8 + f.headerBytes);
    const local = await inspectModel({ kind: "dir", path: shardedDir });
    expect(withoutSource(profile)).toEqual(withoutSource(local));
    expect(profile.source).toBe("hub:test-org/sharded@main");
  });

  it("reads a single-file model in config + index probe (404) + 2 requests, by commit", async () => {
    hub.resetStats();
    const profile = await inspectModel({ kind: "hub", endpoint: hub.endpoint, repo: "test-org/single", revision: commit });
    expect(hub.stats().requests).toBe(4);
    expect(hub.stats().requestsByPath[`/test-org/single/resolve/${commit}/model.safetensors`]).toBe(2);
    expect(withoutSource(profile)).toEqual(withoutSource(await inspectModel({ kind: "dir", path: singleDir })));
  });

  it("sends the bearer token; without it the source is refused as unauthorized", async () => {
    const profile = await inspectModel({ kind: "hub", endpoint: guarded.endpoint, repo: "org/private", revision: "main", token: "s3cret" });
    expect(profile.layers).toBe(3);
    const error = await inspectModel({ kind: "hub", endpoint: guarded.endpoint, repo: "org/private", revision: "main" }).catch((e: unknown) => e);
    expect(isShardctlError(error, "ModelSourceUnauthorized")).toBe(true);
    expect((error as Error).message).toBe("hub:org/private@main: GET config.json answered 401 (no token was given)");
  });

  it("ModelNotFound for an unknown repository or revision", async () => {
    const repo = await inspectModel({ kind: "hub", endpoint: hub.endpoint, repo: "test-org/nope", revision: "main" }).catch((e: unknown) => e);
    expect(isShardctlError(repo, "ModelNotFound")).toBe(true);
    expect((repo as Error).message).toContain("hub:test-org/nope@main: repository not found");
    const rev = await inspectModel({ kind: "hub", endpoint: hub.endpoint, repo: "test-org/single", revision: "dev" }).catch((e: unknown) => e);
    expect(isShardctlError(rev, "ModelNotFound")).toBe(true);
    expect((rev as Error).message).toContain("revision not found");
  });

  it("a remote header whose length exceeds the file names the remote file", async () => {
    const error = await inspectModel({ kind: "hub", endpoint: hub.endpoint, repo: "test-org/broken", revision: "main" }).catch((e: unknown) => e);
    expect(isShardctlError(error, "SafetensorsHeaderInvalid")).toBe(true);
    const size = (await stat(join(brokenDir, "model.safetensors"))).size;
    expect((error as Error).message).toBe(`hub:test-org/broken@main/model.safetensors: header length 5000 bytes exceeds the file size (${size} bytes)`);
  });

  it("ModelNotMlx for a repository with only pytorch_model.bin (the tree listing names it)", async () => {
    const error = await inspectModel({ kind: "hub", endpoint: hub.endpoint, repo: "test-org/bin-only", revision: "main" }).catch((e: unknown) => e);
    expect(isShardctlError(error, "ModelNotMlx")).toBe(true);
    expect((error as Error).message).toContain('found "pytorch_model.bin"');
  });

  it("ModelSourceUnreachable (transient) when nothing listens", async () => {
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, host, resolve));
    const { port } = server.address() as AddressInfo;
    await new Promise<void>((resolve) => server.close(() => resolve()));
    const error = await inspectModel({ kind: "hub", endpoint: `http://${host}:${port}`, repo: "a/b", revision: "main" }).catch((e: unknown) => e);
    expect(isShardctlError(error, "ModelSourceUnreachable")).toBe(true);
    expect((error as { terminal: boolean }).terminal).toBe(false);
  });

  it("a server that answers a Range with 206 and then sends without end is read only to the range's length", async () => {
    // What the server sent past each range asked for, bytes; and whether every response was closed.
    let extraBytes = 0;
    let open = 0;
    const server = createServer((req, res) => {
      const path = decodeURIComponent(new URL(req.url ?? "/", "http://x").pathname).replace("/org/endless/resolve/main/", "");
      const range = /^bytes=(\d+)-(\d+)$/.exec(req.headers.range ?? "");
      readFile(join(singleDir, path)).then(
        (bytes) => {
          if (range === null) return void res.writeHead(200, { "Content-Length": bytes.length }).end(bytes);
          const [start, end] = [Number(range[1]), Number(range[2])];
          res.writeHead(206, { "Content-Range": `bytes ${start}-${end}/${bytes.length}` });
          res.write(bytes.subarray(start, end + 1));
          open++;
          res.on("close", () => open--);
          const zeros = Buffer.alloc(1 << 20);
          const pump = (): void => {
            while (!res.destroyed && res.write(zeros)) extraBytes += zeros.length;
            if (!res.destroyed) res.once("drain", pump);
          };
          pump();
        },
        () => void res.writeHead(404).end(),
      );
    });
    await new Promise<void>((resolve) => server.listen(0, host, resolve));
    try {
      const { port } = server.address() as AddressInfo;
      const started = Date.now();
      const profile = await inspectModel({ kind: "hub", endpoint: `http://${host}:${port}`, repo: "org/endless", revision: "main", timeoutMs: 20_000 });
      expect(Date.now() - started).toBeLessThan(10_000);
      expect(withoutSource(profile)).toEqual(withoutSource(await inspectModel({ kind: "dir", path: singleDir })));
      await expect.poll(() => open, { timeout: 5000 }).toBe(0);
      expect(extraBytes).toBeLessThan(64 << 20);
    } finally {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });

  it("a config.json that drips a byte at a time past the deadline: ModelSourceUnreachable naming the file, at the deadline", async () => {
    const server = createServer((_req, res) => {
      res.writeHead(200, { "Content-Length": 1000 });
      const timer = setInterval(() => res.write("{"), 100);
      res.on("close", () => clearInterval(timer));
    });
    await new Promise<void>((resolve) => server.listen(0, host, resolve));
    try {
      const { port } = server.address() as AddressInfo;
      const started = Date.now();
      const error = await inspectModel({ kind: "hub", endpoint: `http://${host}:${port}`, repo: "org/drip", revision: "main", timeoutMs: 1500 }).catch((e: unknown) => e);
      expect(Date.now() - started).toBeLessThan(5000);
      expect(error).toMatchObject({ reason: "ModelSourceUnreachable", terminal: false });
      expect((error as Error).message).toMatch(/^hub:org\/drip@main\/config\.json: reading the body failed after \d+ bytes \(.*timeout/);
    } finally {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });

  it.each([
    ["with", true],
    ["without", false],
  ])("a server that ignores Range (200, whole file, %s Content-Length) still yields the same profile", async (_with, withLength) => {
    // A Hub mirror without Range support answers 200 with the whole file; one compressing on the
    // fly sends it chunked, its size unsaid (the 8-byte prefix read was once taken for the file's size).
    const server = createServer((req, res) => {
      const path = decodeURIComponent(new URL(req.url ?? "/", "http://x").pathname).replace("/org/norange/resolve/main/", "");
      const file = join(shardedDir, path);
      stat(file).then(
        (st) => {
          res.writeHead(200, withLength ? { "Content-Length": st.size } : {});
          const stream = createReadStream(file);
          stream.pipe(res);
          res.on("close", () => stream.destroy());
        },
        () => {
          res.writeHead(404).end();
        },
      );
    });
    await new Promise<void>((resolve) => server.listen(0, host, resolve));
    try {
      const { port } = server.address() as AddressInfo;
      const profile = await inspectModel({ kind: "hub", endpoint: `http://${host}:${port}`, repo: "org/norange", revision: "main" });
      expect(withoutSource(profile)).toEqual(withoutSource(await inspectModel({ kind: "dir", path: shardedDir })));
    } finally {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});

describe("a Hub model's tokenizer", () => {
  /** The daemon's plan of a two-node cluster serving `repo` from the Hub stand-in: pinned to its commit (the branch's file list) as before staging, or not. */
  async function planOf(repo: string, pin: boolean): Promise<Awaited<ReturnType<typeof planForCluster>>> {
    const settingsFile = join(await tempDir(), "shardctl.toml");
    const settings = parseSettings(
      `[hub]\nendpoint = "${hub.endpoint}"\n[nodes.a]\nhost = "10.0.0.1"\nmodel_dir = "/models"\nmemory = "4GiB"\n[nodes.b]\nhost = "10.0.0.2"\nmodel_dir = "/models"\nmemory = "4GiB"\n`,
      settingsFile,
    );
    if (!settings.ok) throw new Error(JSON.stringify(settings.issues));
    const cluster = parseCluster(
      `nodes = ["a", "b"]\n[model]\nid = "${repo}"\nsource = "hub"\ncontext_length = 256\n`,
      join(settingsFile, "..", "x.toml"),
      settings.value,
    );
    if (!cluster.ok) throw new Error(JSON.stringify(cluster.issues));
    return planForCluster(cluster.value, settings.value, { pin });
  }

  it("is looked for in the file list of the commit a staging pins: without one the plan is refused (ModelTokenizerMissing), before anything is downloaded", async () => {
    hub.resetStats();
    const refused = await planOf("test-org/no-tokenizer", true);
    expect(refused.profile.tokenizer).toBe("missing");
    expect(refused.plan.feasible).toBe(false);
    expect(refused.plan.errors.find((e) => e.reason === "ModelTokenizerMissing")?.message).toBe(
      `hub:test-org/no-tokenizer@${commit} has no tokenizer (neither tokenizer.json nor tokenizer.model beside config.json), so no engine can turn a prompt into tokens: ` +
        "add the model's tokenizer files (tokenizer.json, tokenizer_config.json) to the repository, or serve a revision that has them",
    );
    // Only the listing, config.json, the index probe and the header ranges: no weights.
    expect(hub.stats().bytesServed).toBeLessThan(64 * 1024);
    expect((await planOf("test-org/single", true)).profile.tokenizer).toBe("present");
  });

  it("is not looked for when nothing is staged (a plan of the branch reads only config.json and the headers)", async () => {
    hub.resetStats();
    const plan = await planOf("test-org/no-tokenizer", false);
    expect(plan.profile.tokenizer).toBeUndefined();
    expect(plan.plan.errors.map((e) => e.reason)).not.toContain("ModelTokenizerMissing");
    expect(Object.keys(hub.stats().requestsByPath).some((path) => path.includes("/api/models/"))).toBe(false);
  });
});
