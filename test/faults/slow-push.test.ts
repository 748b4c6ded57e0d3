/**
 * A push over a slow link (a stage host in its own network namespace with a real sshd, tbf at
 * 1 Mbit/s each way, the bottleneck's queue up to 2 s): the transfer completes byte for byte. With
 * a fixed 2 MiB of writes in flight, the connection's keepalive waited behind 16 s of data and the
 * push failed as NodeUnreachable after 4 s, every time; the window now stays near a second of the
 * link's data.
 */
import { randomBytes } from "node:crypto";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { NodePool, type NodeAccess } from "../../src/nodes/index.js";
import { shapeLink } from "./support/link-shaping.js";
import { startLab, type Lab, type LabHost } from "./support/netns.js";

let lab: Lab;
let host: LabHost;
let dir: string;
let pool: NodePool;
let node: NodeAccess;

beforeAll(async () => {
  lab = await startLab(1);
  host = lab.hosts[0]!;
  dir = await mkdtemp(join(tmpdir(), "shardctl-slow-push-"));
  const sshd = lab.sshd.nodes[0]!;
  pool = new NodePool({ knownHostsPath: lab.sshd.knownHostsPath, sshConfigPath: join(dir, "no-ssh-config") });
  node = pool.get({ name: "n1", host: sshd.host, port: sshd.port, user: sshd.user, identityFile: lab.sshd.identityFile, modelDir: sshd.modelDir });
}, 60_000);

afterAll(async () => {
  await pool?.close();
  await lab?.close();
  if (dir !== undefined) await rm(dir, { recursive: true, force: true });
}, 60_000);

describe("a push over a slow link", () => {
  it("completes byte for byte, in about the time the link takes", async () => {
    // 12 s at 1 Mbit/s: three times the keepalive's bound.
    const content = randomBytes(1_500_000);
    const source = join(dir, "blob");
    await writeFile(source, content);
    const target = join(lab.sshd.nodes[0]!.modelDir, "pushed");
    const unshape = await shapeLink(host, { rateKbit: 1_000, burstBytes: 4_000, latencyMs: 2_000 });
    const started = Date.now();
    try {
      await node.putFile(source, target);
    } finally {
      await unshape();
    }
    expect((await readFile(target)).equals(content)).toBe(true);
    // The link's own time is 12 s (and one push, not a series of failed and resumed ones).
    expect(Date.now() - started).toBeLessThan(40_000);
  }, 120_000);
});
