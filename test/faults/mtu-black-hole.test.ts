/**
 * A path-MTU black hole between the two stage hosts (a tunnel, VPN or switch with a smaller MTU,
 * ICMP "fragmentation needed" filtered): small packets pass — the transport's handshake, its
 * heartbeats, ping, SSH, the daemon's probes — and every packet over 1400 bytes between n1 and n2
 * is dropped (iptables length match in n1's namespace, both ways). The model's activations (hidden
 * size 512: about 2 KiB a token) are the first large frames, sent by the coordinator's warm-up.
 *
 * A launch under it cannot form its pipeline: the stage waiting for them hears nothing from its
 * neighbour while another member still hears that neighbour. That is said as a link fault
 * (StageLinkUnreachable) naming the black hole and how to see it, given back to the restart budget
 * like any link fault (it once spent the budget in three launches with the coordinator's or a
 * stage's exit as the reason, and stayed Stalled after the heal); once the path carries large
 * packets again the cluster serves by itself.
 *
 * A black hole that comes while the cluster idles is found without a request: each idle link pads
 * a heartbeat to 16 KiB now and then (--large-heartbeat-ms), which cannot cross, and every frame
 * behind it waits in the byte stream. Without that, the cluster said Healthy until its first request.
 */
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { expect, it } from "vitest";
import { chat } from "../reconciler/daemon-fixture.js";
import { useLabCluster } from "./support/lab-cluster.js";

const run = promisify(execFile);
const name = "mtu";
let holed = false;
const cluster = useLabCluster(name, { hosts: 2, layers: 4, hidden: 512, restartBudget: 2, beforeClose: async () => blackHole(false) });

/** Drop (or let through again) every packet over 1400 bytes between n1 and n2, in n1's namespace. */
async function blackHole(on: boolean): Promise<void> {
  if (on === holed) return;
  const [n1, n2] = [cluster.lab.hosts[0]!, cluster.lab.hosts[1]!];
  const iptables = (args: string[]) => run("ip", ["netns", "exec", n1.netns, "iptables", "-w", ...args]);
  const op = on ? "-I" : "-D";
  await iptables([op, "OUTPUT", "-d", n2.address, "-m", "length", "--length", "1401:65535", "-j", "DROP"]);
  await iptables([op, "INPUT", "-s", n2.address, "-m", "length", "--length", "1401:65535", "-j", "DROP"]);
  holed = on;
}

it("a launch across a path-MTU black hole fails as a link fault naming it, spends no budget, and serves once the path is mended", async () => {
  await blackHole(true);
  await cluster.define();
  const failed = await cluster.waitFor((s) => s.lastError?.reason === "StageLinkUnreachable", 90_000);
  expect(failed.lastError!.message).toMatch(/heard nothing from it for \d+ ms while another member still heard it/);
  expect(failed.lastError!.message).toContain("A path-MTU black hole");
  expect(failed.lastError!.message).toContain("ping -M do -s 1472");
  // Given back: never Stalled, however many launches the black hole fails.
  expect(failed.health).not.toBe("Stalled");
  expect(failed.restarts?.count ?? 0).toBeLessThan(2);

  await blackHole(false);
  const ready = await cluster.waitForReady(90_000);
  expect(ready.restarts?.count).toBe(1);
  // Large frames cross again: a completion through the whole pipeline (chat throws on anything but 200).
  expect(typeof (await chat(ready.coordinator!.url, cluster.world.modelDir))).toBe("string");
}, 240_000);

it("an idle cluster a black hole comes between is found without a request: the padded heartbeat cannot pass, and the death names the black hole", async () => {
  // Every idle link pads a heartbeat to 16 KiB each 2 s here (30 s by default).
  const revision = await cluster.define({ extraArgs: ["--large-heartbeat-ms", "2000"] });
  await cluster.waitForReady(90_000, revision);
  const before = (await cluster.ledger())!.startedAt;
  await blackHole(true);
  const holedAt = Date.now();
  // No request is sent: only the links' own frames cross the path.
  const found = await cluster.waitFor((s) => s.restarts?.evidence.some((e) => Date.parse(e.at) >= holedAt) === true, 30_000);
  const foundMs = Date.now() - holedAt;
  expect(found.health).not.toBe("Healthy");
  // Its words, once the members' logs are read.
  const explained = await cluster.waitFor(
    (s) => s.restarts?.evidence.some((e) => Date.parse(e.at) >= holedAt && !e.message.includes("why is being read")) === true,
    30_000,
  );
  const death = explained.restarts!.evidence.find((e) => Date.parse(e.at) >= holedAt)!;
  console.log(`idle black hole found in ${foundMs} ms: ${death.reason}: ${death.message}`);
  // Within a padded beat (2 s) and the links' bound (2.5 s), with room for the daemon's look.
  expect(foundMs).toBeLessThan(12_000);
  expect(death.message).toContain("path-MTU black hole");
  // Relaunched under it, the launch fails naming the black hole, as in the test above.
  const relaunch = await cluster.waitFor((s) => s.lastError?.reason === "StageLinkUnreachable" && Date.parse(s.lastError.at) > holedAt, 90_000);
  expect(relaunch.lastError!.message).toContain("A path-MTU black hole");
  expect((await cluster.ledger())?.startedAt).not.toBe(before);

  await blackHole(false);
  const ready = await cluster.waitForReady(90_000, revision);
  expect(typeof (await chat(ready.coordinator!.url, cluster.world.modelDir))).toBe("string");
}, 240_000);
