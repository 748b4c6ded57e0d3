/**
 * A node partitioned in the middle of an SFTP transfer (test/faults/support/netns.ts: a stage host in
 * its own network namespace with a real sshd, iptables DROP both ways, no FIN, no RST). The keepalive
 * drops the connection within its 4 s bound; every transfer on it must then fail as NodeUnreachable
 * at once, not wait for ever for the close of its remote handle on the dead channel: a push (the
 * first attempt's fastPut and a resumed write stream), a file write, and a rename (one request, which
 * ssh2 fails just before the session closes). After the heal the same node
 * access works again, and a push resumed from the partial file completes it byte for byte.
 *
 * The link is rate-limited during each transfer (tbf, 800 kbit/s: 20 s for the 2 MB file) so it is
 * still running when the cut comes.
 */
import { randomBytes } from "node:crypto";
import { mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { NodePool, type NodeAccess } from "../../src/nodes/index.js";
import { sleep } from "../reconciler/daemon-fixture.js";
import { shapeLink } from "./support/link-shaping.js";
import { startLab, type Lab, type LabHost } from "./support/netns.js";
import { until } from "./support/world-checks.js";

let lab: Lab;
let host: LabHost;
let dir: string;
let pool: NodePool;
let node: NodeAccess;
/** A local file of 2 MB: 20 s over the shaped link. */
let source: string;
let content: Buffer;

/** From the partition to the transfer's failure, at most: the keepalive's 4 s bound and a margin. */
const failureBoundMs = 6_000;

beforeAll(async () => {
  lab = await startLab(1);
  host = lab.hosts[0]!;
  dir = await mkdtemp(join(tmpdir(), "shardctl-sftp-partition-"));
  content = randomBytes(2_000_000);
  source = join(dir, "blob");
  await writeFile(source, content);
  const sshd = lab.sshd.nodes[0]!;
  pool = new NodePool({ knownHostsPath: lab.sshd.knownHostsPath, sshConfigPath: join(dir, "no-ssh-config") });
  node = pool.get({ name: "n1", host: sshd.host, port: sshd.port, user: sshd.user, identityFile: lab.sshd.identityFile, modelDir: sshd.modelDir });
}, 60_000);

afterAll(async () => {
  await host?.heal().catch(() => undefined);
  await pool?.close();
  await lab?.close();
  if (dir !== undefined) await rm(dir, { recursive: true, force: true });
}, 60_000);

/**
 * Start a transfer over the shaped link, partition the host once `started` holds, then time the
 * transfer's end: its error and the ms from the cut. The host is healed and its link unshaped after.
 */
async function cutDuring(start: () => Promise<void>, started: () => Promise<boolean>): Promise<{ error: unknown; afterCutMs: number }> {
  const unshape = await shapeLink(host, { rateKbit: 800, burstBytes: 4_000, latencyMs: 2_000 });
  const settled = start().then(
    () => ({ error: undefined, at: Date.now() }),
    (error: unknown) => ({ error, at: Date.now() }),
  );
  await until(started, 10_000, "the transfer under way");
  const cutAt = Date.now();
  await host.partition();
  try {
    const outcome = await Promise.race([settled, sleep(20_000).then(() => ({ error: new Error("still running 20 s after the partition"), at: Date.now() }))]);
    return { error: outcome.error, afterCutMs: outcome.at - cutAt };
  } finally {
    await host.heal();
    await unshape();
  }
}

describe("a partition in the middle of an SFTP transfer", () => {
  it("a push (fastPut) fails as NodeUnreachable within the keepalive bound; after the heal, a resumed push completes the file", async () => {
    const target = join(lab.sshd.nodes[0]!.modelDir, "pushed.incomplete");
    let pushed = 0;
    const { error, afterCutMs } = await cutDuring(
      () => node.putFile(source, target, { onProgress: (bytes) => (pushed = bytes) }),
      async () => pushed > 0,
    );
    expect(error).toMatchObject({ reason: "NodeUnreachable" });
    expect((error as Error).message).toContain("node n1");
    expect(afterCutMs).toBeLessThan(failureBoundMs);

    // The node answers again, and the push resumes from what reached it.
    const have = (await stat(target)).size;
    expect(have).toBeLessThan(content.length);
    await node.putFile(source, target, { startOffset: have });
    expect((await readFile(target)).equals(content)).toBe(true);
  }, 60_000);

  it("a resumed push (a write stream from an offset) fails as NodeUnreachable within the keepalive bound", async () => {
    const target = join(lab.sshd.nodes[0]!.modelDir, "resumed.incomplete");
    await writeFile(target, content.subarray(0, 100_000));
    let pushed = 0;
    const { error, afterCutMs } = await cutDuring(
      () => node.putFile(source, target, { startOffset: 100_000, onProgress: (bytes) => (pushed = bytes) }),
      async () => pushed > 0,
    );
    expect(error).toMatchObject({ reason: "NodeUnreachable" });
    expect(afterCutMs).toBeLessThan(failureBoundMs);
    expect(await node.run(["true"], { deadlineMs: 10_000 })).toMatchObject({ exitCode: 0 });
  }, 60_000);

  it("a file write fails as NodeUnreachable within the keepalive bound and leaves the target untouched", async () => {
    const target = join(lab.sshd.nodes[0]!.modelDir, "written");
    const startedAt = Date.now();
    const { error, afterCutMs } = await cutDuring(
      () => node.writeFile(target, content),
      async () => Date.now() - startedAt > 1_000,
    );
    expect(error).toMatchObject({ reason: "NodeUnreachable" });
    expect(afterCutMs).toBeLessThan(failureBoundMs);
    expect(await stat(target).catch(() => undefined)).toBeUndefined();
  }, 60_000);

  it("an operation of one request (a rename) on a connection that drops fails as NodeUnreachable, not as a file error", async () => {
    const from = join(lab.sshd.nodes[0]!.modelDir, "renamed-from");
    await writeFile(from, "x");
    // The SFTP session open, then cut: the rename's request gets no answer, and ssh2 fails it ("No
    // response from server") just before the session closes.
    expect(await node.stat(from)).toMatchObject({ size: 1 });
    await host.partition();
    const cutAt = Date.now();
    try {
      const error = await node.rename(from, `${from}-to`).catch((e: unknown) => e);
      expect(error).toMatchObject({ reason: "NodeUnreachable" });
      expect(Date.now() - cutAt).toBeLessThan(failureBoundMs);
    } finally {
      await host.heal();
    }
  }, 60_000);
});
