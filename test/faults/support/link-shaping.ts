/**
 * A slow link for a lab host (test/faults/support/netns.ts): a token-bucket rate limit (`tc qdisc …
 * tbf`) on both ends of the host's veth — its eth0 (host → control) and its peer on the lab bridge
 * (control → host). This kernel has no sch_netem (and no fq, fq_codel or cake): a fixed added delay
 * cannot be made with tc, only the queueing delay a rate limit imposes on a burst (bounded by the
 * bucket's `latency`). Random loss is the lab's own `LabHost.loss` (iptables `statistic`). No vitest
 * imports.
 */
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import type { LabHost } from "./netns.js";

const run = promisify(execFile);

export interface LinkShape {
  /** Rate in kbit/s each way. */
  rateKbit: number;
  /** Bucket size in bytes (the burst sent at line rate). */
  burstBytes: number;
  /** Longest a packet may wait in the bucket's queue before it is dropped, ms. */
  latencyMs: number;
}

/** The name, in the root namespace, of the veth end paired with the host's eth0. */
async function peerOf(host: LabHost): Promise<string> {
  const { stdout } = await run("ip", ["netns", "exec", host.netns, "ip", "-o", "link", "show", "eth0"]);
  // "2: eth0@if17: <…>": the peer's interface index in the other namespace.
  const index = /eth0@if(\d+)/.exec(stdout)?.[1];
  if (index === undefined) throw new Error(`cannot find the peer of ${host.netns}'s eth0 in: ${stdout}`);
  const links = (await run("ip", ["-o", "link", "show"])).stdout.split("\n");
  const name = links.map((l) => new RegExp(`^${index}:\\s+([^:@\\s]+)`).exec(l)?.[1]).find((n) => n !== undefined);
  if (name === undefined) throw new Error(`no link with index ${index} in the root namespace`);
  return name;
}

/** Rate-limit both directions of the host's link; returns the function that removes the limit. */
export async function shapeLink(host: LabHost, shape: LinkShape): Promise<() => Promise<void>> {
  const peer = await peerOf(host);
  const tbf = ["tbf", "rate", `${shape.rateKbit}kbit`, "burst", String(shape.burstBytes), "latency", `${shape.latencyMs}ms`];
  await run("ip", ["netns", "exec", host.netns, "tc", "qdisc", "replace", "dev", "eth0", "root", ...tbf]);
  await run("tc", ["qdisc", "replace", "dev", peer, "root", ...tbf]);
  return async () => {
    await run("ip", ["netns", "exec", host.netns, "tc", "qdisc", "del", "dev", "eth0", "root"]).catch(() => undefined);
    await run("tc", ["qdisc", "del", "dev", peer, "root"]).catch(() => undefined);
  };
}

/** Packets the host's iptables DROP rules (INPUT and OUTPUT) have dropped so far: proof the loss applied. */
export async function droppedPackets(host: LabHost): Promise<number> {
  let total = 0;
  for (const chain of ["INPUT", "OUTPUT"]) {
    const { stdout } = await run("ip", ["netns", "exec", host.netns, "iptables", "-w", "-L", chain, "-v", "-n", "-x"]);
    for (const line of stdout.split("\n")) {
      const fields = line.trim().split(/\s+/);
      if (fields[2] === "DROP") total += Number(fields[0]);
    }
  }
  return total;
}

/** Bytes the host's rate limits have sent, each end (tc -s): proof the traffic went through the buckets. */
export async function shapedBytes(host: LabHost): Promise<number> {
  const { stdout } = await run("ip", ["netns", "exec", host.netns, "tc", "-s", "qdisc", "show", "dev", "eth0"]);
  return Number(/Sent (\d+) bytes/.exec(stdout)?.[1] ?? 0);
}
