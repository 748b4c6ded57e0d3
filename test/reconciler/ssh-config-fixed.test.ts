/**
 * A node the ssh client config reaches through a ProxyJump, which shardctl does not follow: the
 * cluster stalls (SshConfigUnsupported, terminal, so that a CI `wait` ends), and once the operator
 * takes the ProxyJump out of the ssh config — touching neither the settings nor the definition —
 * the next resync launches it, also when the ProxyJump is in a file the ssh config includes. A
 * stalled cluster used to stay stalled until `shardctl reconcile`.
 * Two real sshd nodes on loopback; the daemon runs in this process with a 1 s resync.
 */
import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { expect, test } from "vitest";
import { conditionOf, waitForStatus } from "./daemon-fixture.js";
import { useDaemonWorld } from "./use-daemon-world.js";

const dw = useDaemonWorld({ sshNodes: 2, resyncMs: 1_000 });

test("a ProxyJump in the ssh config: stalled saying so; launched at the next resync once it is taken out", async () => {
  const { world } = dw;
  // The settings name "no-ssh-config" as [ssh] config; the ProxyJump is in a file it includes.
  await mkdir(join(world.root, "ssh.d"));
  await writeFile(join(world.root, "no-ssh-config"), `Include ${join(world.root, "ssh.d", "*.conf")}\n`);
  const sshConfig = join(world.root, "ssh.d", "n2.conf");
  const n2 = world.hosts.get("n2")!;
  await writeFile(sshConfig, `Host ${n2}\n  ProxyJump ops@bastion.example\n`);
  const revision = await dw.define("proxied", { nodes: ["n1", "n2"] });
  const stalled = await waitForStatus(world, "proxied", (s) => s.health === "Stalled", 60_000);
  expect(conditionOf(stalled, "Ready")?.reason).toBe("SshConfigUnsupported");
  expect(stalled.lastError?.message).toMatch(/ProxyJump ops@bastion\.example, which shardctl does not follow/);
  expect(stalled.lastError?.message).toMatch(/once the ssh config is changed, the daemon tries again at its next resync$/);
  // Still stalled a few resyncs later while nothing changes.
  await new Promise((r) => setTimeout(r, 3_000));
  expect((await waitForStatus(world, "proxied", () => true)).health).toBe("Stalled");
  await writeFile(sshConfig, "# ProxyJump taken out: n2 is reached directly\n");
  await dw.waitServing("proxied", revision, 60_000);
}, 180_000);
