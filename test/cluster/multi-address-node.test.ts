/**
 * A node registered by a name with several addresses (/etc/hosts, round-robin DNS): SSH tries them
 * in turn and reaches the one where the node answers; the engines must bind and be dialled at that
 * address too. Regression: they were given the resolver's first address, another machine's (here
 * one where nothing listens), and the cluster served at an address of no node. The child process
 * runs in a mount namespace of its own whose /etc/hosts lists the name twice, the dead address first.
 */
import { execFile } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, expect, it } from "vitest";
import { allocateHosts } from "../support/test-world.js";
import { startSshdNodes, type SshdSet } from "../support/sshd.js";
import { requireBuild } from "../cli/support/run-shardctl.js";

const run = promisify(execFile);
let dir: string;
let sshd: SshdSet;
let dead: string;

beforeAll(async () => {
  requireBuild();
  dir = await mkdtemp(join(tmpdir(), "shardctl-multi-address-"));
  sshd = await startSshdNodes({ count: 1 });
  // Leased, so no other test listens there: nothing answers on it.
  dead = (await allocateHosts(1))[0]!;
}, 60_000);

afterAll(async () => {
  await sshd?.close();
  await rm(dir, { recursive: true, force: true });
});

it("the engines are given the address SSH reached, not the resolver's first", async () => {
  if (process.getuid?.() !== 0) throw new Error("this test bind-mounts /etc/hosts in a mount namespace of its own: run it as root");
  const n = sshd.nodes[0]!;
  const hosts = join(dir, "hosts");
  await writeFile(hosts, `127.0.0.1 localhost\n${dead} gpu-twice\n${n.host} gpu-twice\n`);
  const script = join(dir, "ask.mjs");
  const dist = resolve("dist/src");
  await writeFile(
    script,
    [
      `import { NodePool } from ${JSON.stringify(join(dist, "nodes/index.js"))};`,
      `import { bindHostOf } from ${JSON.stringify(join(dist, "cluster/index.js"))};`,
      `import { engineOf } from ${JSON.stringify(join(dist, "engines/index.js"))};`,
      `const pool = new NodePool({ knownHostsPath: ${JSON.stringify(join(dir, "known_hosts"))}, sshConfigPath: ${JSON.stringify(join(dir, "none"))} });`,
      `const node = pool.get({ name: "twice", host: "gpu-twice", port: ${n.port}, user: ${JSON.stringify(n.user)}, identityFile: ${JSON.stringify(sshd.identityFile)}, hostKeyPolicy: "accept-new", modelDir: "/tmp" });`,
      `const said = await node.run(["echo", "answered"]);`,
      `console.log(JSON.stringify({ said: said.stdout.trim(), bind: await bindHostOf(node, engineOf("reference")) }));`,
      `await pool.close();`,
    ].join("\n"),
  );
  const { stdout } = await run("unshare", [
    "--mount",
    "--propagation",
    "private",
    "sh",
    "-c",
    `mount --bind "$1" /etc/hosts && exec "$2" "$3"`,
    "sh",
    hosts,
    process.execPath,
    script,
  ]);
  expect(JSON.parse(stdout)).toEqual({ said: "answered", bind: n.host });
}, 60_000);
