/**
 * A Hub whose listing disagrees with what it serves. A file served larger than its listed size is
 * stopped at the listed size on every download path (plain HTTP and node:http on the control node,
 * curl on an SSH node), its partial file removed, and the failure is terminal: the node's disk never
 * holds more than the listing promised. A listing with a path twice, a path that is not a string or
 * a file name with a control character is refused, naming the entry, before anything is downloaded.
 */
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { createServer } from "node:http";
import { createServer as createNetServer, type AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LocalNode, NodePool, type NodeAccess } from "../../src/nodes/index.js";
import { makeTestModel } from "../../src/planner/index.js";
import { fetchHubManifest, incompletePath, stageNode, type Manifest, type StagingSource } from "../../src/staging/index.js";
import { startHubServer, type HubServer, type HubTreeEntry } from "../support/hub-server.js";
import { sshNodeConfig, startSshdNodes, type SshdSet } from "../support/sshd.js";
import { allocateHost } from "../support/test-world.js";

const repo = "test-org/hostile-hub";
const commit = "5555555555666666666677777777778888888888";
const big = "big.safetensors";
/** What the Hub serves of `big`, bytes; its listing says 10. */
const servedSize = 64 << 20;
const listedSize = 10;

let sshd: SshdSet;
let hub: HubServer;
/** The same repository, its bodies sent chunked (no Content-Length): the node:http download path. */
let chunkedHub: HubServer;
let pool: NodePool;
let root: string;
let modelDir: string;
let counter = 0;

/** The listing with `big` said to be `listedSize` bytes (its LFS size as well). */
function shrinkBig(entries: HubTreeEntry[]): HubTreeEntry[] {
  return entries.map((e) => (e.path !== big ? e : { ...e, size: listedSize, ...(e.lfs === undefined ? {} : { lfs: { ...e.lfs, size: listedSize } }) }));
}

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), "shardctl-hostile-hub-"));
  modelDir = join(root, "model");
  await makeTestModel(modelDir, { layers: 2, hidden: 64, intermediate: 128, vocab: 512, shards: 1, seed: 11 });
  const bytes = Buffer.alloc(servedSize);
  for (let i = 0; i < bytes.length; i += 4) bytes.writeUInt32LE(i, i);
  await writeFile(join(modelDir, big), bytes);
  const repos = [{ repo, commit, dir: modelDir, tree: shrinkBig }];
  [sshd, hub, chunkedHub] = await Promise.all([startSshdNodes({ count: 1 }), startHubServer({ repos }), startHubServer({ repos, chunked: true })]);
  pool = new NodePool({ knownHostsPath: sshd.knownHostsPath, sshConfigPath: join(root, "no-ssh-config") });
});

afterAll(async () => {
  await pool?.close();
  await hub?.close();
  await chunkedHub?.close();
  await sshd?.close();
  if (root) await rm(root, { recursive: true, force: true });
});

function sshNode(): NodeAccess {
  return pool.get(sshNodeConfig(sshd, 0, { modelDir: join(sshd.nodes[0]!.modelDir, `h${++counter}`) }));
}

function localNode(): NodeAccess {
  return new LocalNode({ name: "local", host: "local", modelDir: join(root, `local-${++counter}`) });
}

describe("a file the Hub serves larger than its listing says", () => {
  const paths = [
    // The plain-HTTP path reads Content-Length first; node:http is reached after it gives up on a chunked body.
    { path: "plain HTTP on the control node", node: localNode, server: () => hub, knowsLength: true, requests: 1 },
    { path: "node:http on the control node (no Content-Length)", node: localNode, server: () => chunkedHub, knowsLength: false, requests: 2 },
    { path: "curl on an SSH node", node: sshNode, server: () => hub, knowsLength: false, requests: 1 },
  ];
  for (const { path, node: makeNode, server, knowsLength, requests } of paths) {
    for (const resumed of [false, true]) {
      it(`is stopped at the listed size, removed, and fails terminally: ${path}${resumed ? ", resuming a partial file" : ""}`, async () => {
        const source: StagingSource = { kind: "hub", endpoint: server().endpoint, repo, revision: "main" };
        const manifest: Manifest = await fetchHubManifest(source);
        expect(manifest.files.find((f) => f.path === big)?.size).toBe(listedSize);
        const node = makeNode();
        const partial = incompletePath(node.config.modelDir, repo, await server().sha256Of(repo, big));
        if (resumed) {
          await mkdir(join(partial, ".."), { recursive: true });
          await writeFile(partial, (await readFile(join(modelDir, big))).subarray(0, 4));
        }
        server().resetStats();
        const error = await stageNode(node, source, manifest, { files: [big], attempts: 3 }).catch((e: unknown) => e);
        expect(error).toMatchObject({ reason: "DownloadTooLarge", terminal: true });
        const message = (error as Error).message;
        expect(message).toContain(`node ${node.config.name}: `);
        expect(message).toContain(`${big} is listed as ${listedSize} bytes`);
        expect(message).toMatch(knowsLength ? new RegExp(`served as ${servedSize} bytes`) : new RegExp(`served as more than ${listedSize} bytes`));
        expect(await node.stat(partial)).toBeUndefined();
        // Stopped, not read to the end, and not retried: a commit's file stays that size.
        const stats = server().stats();
        const resolvePath = `/${repo}/resolve/${commit}/${big}`;
        expect(stats.requestsByPath[resolvePath]).toBe(requests);
        expect(stats.bytesByPath[resolvePath] ?? 0).toBeLessThan(servedSize / 2);
      });
    }
  }
});

describe("a listing staging cannot use is refused before anything is downloaded", () => {
  /** Serve a copy of the repository under another id with its listing rewritten; its pinned manifest, or the error. */
  async function manifestOf(tree: (entries: HubTreeEntry[]) => unknown[]): Promise<unknown> {
    const id = `test-org/odd-listing-${++counter}`;
    hub.setRepo({ repo: id, commit, dir: modelDir, tree });
    hub.resetStats();
    const result = await fetchHubManifest({ endpoint: hub.endpoint, repo: id, revision: commit }).catch((e: unknown) => e);
    // The tree request only: no file was asked for.
    expect(Object.keys(hub.stats().requestsByPath)).toEqual([`/api/models/${id}/tree/${commit}`]);
    return result;
  }

  it("a path listed twice (with different hashes) is HubListingInvalid, naming the path and both entries", async () => {
    const error = await manifestOf((entries) => {
      const other = entries.find((e) => e.type === "file" && e.path !== "config.json")!;
      return [...entries, { ...other, path: "config.json" }];
    });
    expect(error).toMatchObject({ reason: "HubListingInvalid", terminal: true });
    expect((error as Error).message).toMatch(/lists "config\.json" twice \(entries \d+ and \d+\)/);
  });

  it("a path that is not a string, or an entry that is not an object, is HubListingInvalid, naming the entry", async () => {
    const objectPath = await manifestOf((entries) => entries.map((e) => (e.path === "config.json" ? { ...e, path: { toString: "config.json" } } : e)));
    expect(objectPath).toMatchObject({ reason: "HubListingInvalid", terminal: true });
    expect((objectPath as Error).message).toMatch(/entry \d+ .*has a path that is an object, not a string: \{"type":"file",.*"path":\{"toString":"config\.json"\}/);

    const nullEntry = await manifestOf((entries) => [...entries, null]);
    expect(nullEntry).toMatchObject({ reason: "HubListingInvalid", terminal: true });
    expect((nullEntry as Error).message).toMatch(/entry \d+ .*is null, not an object/);
  });

  it("a hash that does not fit its kind of file, or a size that is not a number, is HubListingInvalid, naming the file; `lfs: null` is no LFS", async () => {
    // An LFS oid of 40 digits: a sha256 that can never match, found only after the download.
    const shortOid = await manifestOf((entries) => entries.map((e) => (e.lfs !== undefined ? { ...e, lfs: { ...e.lfs, oid: e.oid } } : e)));
    expect(shortOid).toMatchObject({ reason: "HubListingInvalid", terminal: true });
    expect((shortOid as Error).message).toMatch(/gives "[^"]*\.safetensors" a hash that is not an LFS oid of 64 hex digits \(sha256\)/);
    // A size of null (it became 0 bytes, then DownloadTooLarge once the file came).
    const nullSize = await manifestOf((entries) => entries.map((e) => (e.path === "config.json" ? { ...e, size: null } : e)));
    expect(nullSize).toMatchObject({ reason: "HubListingInvalid", terminal: true });
    expect((nullSize as Error).message).toMatch(/gives "config\.json" a size that is not a whole number of bytes/);
    // A weights file listed without LFS (its git hash would need the whole file in memory).
    const bigWithoutLfs = await manifestOf((entries) =>
      entries.map((e) => (e.lfs !== undefined ? { type: e.type, oid: e.oid, size: 100 * 1024 * 1024, path: e.path } : e)),
    );
    expect(bigWithoutLfs).toMatchObject({ reason: "HubListingInvalid", terminal: true });
    expect((bigWithoutLfs as Error).message).toMatch(/lists "[^"]*\.safetensors" \(104857600 bytes\) without LFS/);
    // "lfs": null is a file without LFS, named by its git oid: the listing is usable as it is.
    const nullLfs = await manifestOf((entries) => entries.map((e) => (e.lfs === undefined ? { ...e, lfs: null } : e)));
    expect(nullLfs).toMatchObject({ files: expect.arrayContaining([expect.objectContaining({ path: "config.json", hashAlgo: "git-sha1" })]) });
  });

  it("a size past 2^53, a name segment over 255 bytes, a name that is both a file and a folder: HubListingInvalid or UnsafeFileName, naming it", async () => {
    const huge = await manifestOf((entries) => entries.map((e) => (e.path === "config.json" ? { ...e, size: 2 ** 62 } : e)));
    expect(huge).toMatchObject({ reason: "HubListingInvalid", terminal: true });
    expect((huge as Error).message).toMatch(/gives "config\.json" a size past 2\^53 bytes \(8 PiB\), far beyond any model file/);
    const long = await manifestOf((entries) => [...entries, { ...entries.find((e) => e.path === "config.json")!, path: `${"x".repeat(300)}.json` }]);
    expect(long).toMatchObject({ reason: "UnsafeFileName", terminal: true });
    expect((long as Error).message).toMatch(/has a segment over 255 bytes, longer than file systems take a name; refusing to stage it$/);
    const both = await manifestOf((entries) => [...entries, { ...entries.find((e) => e.path === "config.json")!, path: "config.json/inner.json" }]);
    expect(both).toMatchObject({ reason: "HubListingInvalid", terminal: true });
    expect((both as Error).message).toMatch(/lists "config\.json" as a file and as the folder of "config\.json\/inner\.json"/);
  });

  // How the message shows each name (every control character escaped), and the name.
  it.each([
    [String.raw`"new\nline.json"`, "new\nline.json"],
    [String.raw`"tab\there.json"`, "tab\there.json"],
    [String.raw`"cr\r.json"`, "cr\r.json"],
    [String.raw`"bell\u0007.json"`, "bell\u0007.json"],
    [String.raw`"del\u007f.json"`, "del\u007f.json"],
    [String.raw`"next-line\u0085.json"`, "next-line\u0085.json"],
  ])("a file name with a control character is UnsafeFileName: %s", async (shown, name) => {
    const error = await manifestOf((entries) => entries.map((e) => (e.path === "config.json" ? { ...e, path: name } : e)));
    expect(error).toMatchObject({ reason: "UnsafeFileName", terminal: true });
    expect((error as Error).message).toContain(`lists the file name ${shown}, which contains a control character`);
  });
});

// Regression: curl on an SSH node followed a Hub's redirect to ftp://, and a silent FTP server held
// each attempt for 2 minutes (curl's own FTP timeout), past the idle limit.
describe("a Hub that redirects a download to another protocol", () => {
  it("ftp:// is refused on an SSH node and on the control machine at once, naming the protocol; nothing is fetched from it", async () => {
    const silentHost = await allocateHost();
    let reached = 0;
    const silent = createNetServer((socket) => {
      reached++;
      socket.on("error", () => undefined);
    });
    await new Promise<void>((resolve) => silent.listen(0, silentHost, resolve));
    const ftp = `ftp://${silentHost}:${(silent.address() as AddressInfo).port}/model.safetensors`;
    // The Hub's answers until the staging begins; then every file answered with a redirect to the silent server.
    let redirecting = false;
    const front = createServer((req, res) => {
      if (redirecting && req.url?.includes("/resolve/") === true) return res.writeHead(302, { location: ftp }).end();
      const upstream = new URL(req.url ?? "/", hub.endpoint);
      void fetch(upstream, { method: req.method ?? "GET" }).then(async (answer) =>
        res.writeHead(answer.status, Object.fromEntries(answer.headers)).end(Buffer.from(await answer.arrayBuffer())),
      );
    });
    const frontHost = await allocateHost();
    await new Promise<void>((resolve) => front.listen(0, frontHost, resolve));
    try {
      const source: StagingSource = { kind: "hub", endpoint: `http://${frontHost}:${(front.address() as AddressInfo).port}`, repo, revision: "main" };
      const manifest = await fetchHubManifest(source);
      redirecting = true;
      const startedAt = Date.now();
      const error = await stageNode(sshNode(), source, manifest, { files: ["config.json"], attempts: 1 }).catch((e: unknown) => e);
      expect(error).toMatchObject({ reason: expect.stringMatching(/^Download|^Staging/) });
      expect((error as Error).message).toMatch(/[Pp]rotocol.*ftp.*(not supported|disabled)/);
      // On the control machine (a local node) too, naming both addresses.
      const local = await stageNode(localNode(), source, manifest, { files: ["config.json"], attempts: 1 }).catch((e: unknown) => e);
      expect(local).toMatchObject({ reason: "DownloadFailed" });
      expect((local as Error).message).toMatch(new RegExp(`: HTTP 302 redirects to ${ftp.replace(/[.]/g, "\\.")}, which is not http or https; only those are followed`));
      // Refused by curl before any connection: not held until an idle limit or curl's own timeout.
      expect(reached).toBe(0);
      expect(Date.now() - startedAt).toBeLessThan(30_000);
    } finally {
      front.closeAllConnections();
      await new Promise<void>((resolve) => front.close(() => resolve()));
      await new Promise<void>((resolve) => silent.close(() => resolve()));
    }
  });
});
