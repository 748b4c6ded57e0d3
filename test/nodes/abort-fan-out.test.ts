/**
 * Commands listen on their caller's signal, and callers fan out on one (a pass probes every node of
 * a cluster at once): sixteen commands on one signal print no "Possible EventTarget memory leak"
 * warning (a cluster of 11 nodes printed one into the daemon's JSON log every planning pass), and
 * the signal still stops every one of them.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startBothNodes, type BothNodes } from "../support/both-nodes.js";

let both: BothNodes;
beforeAll(async () => {
  both = await startBothNodes("shardctl-abort-fan-out-");
}, 60_000);
afterAll(async () => {
  await both?.close();
});

describe.each(["local", "ssh"] as const)("%s node", (kind) => {
  it("sixteen commands on one signal: no listener warning, and the abort stops them all", async () => {
    const warnings: string[] = [];
    const onWarning = (warning: Error): void => void warnings.push(`${warning.name}: ${warning.message}`);
    process.on("warning", onWarning);
    try {
      const node = both.node(kind);
      const quick = new AbortController();
      const answers = await Promise.all(Array.from({ length: 16 }, (_, i) => node.run(["echo", String(i)], { signal: quick.signal })));
      expect(answers.map((a) => a.stdout.trim())).toEqual(Array.from({ length: 16 }, (_, i) => String(i)));

      const stop = new AbortController();
      const started = performance.now();
      const slow = Promise.all(Array.from({ length: 16 }, () => node.run(["sleep", "30"], { signal: stop.signal, deadlineMs: 60_000 })));
      await new Promise((r) => setTimeout(r, 500));
      stop.abort(new Error("the daemon is stopping"));
      const stopped = await slow;
      expect(stopped.every((r) => r.exitCode === undefined)).toBe(true);
      expect(performance.now() - started).toBeLessThan(10_000);
      // Warnings are emitted on the next tick.
      await new Promise((r) => setImmediate(r));
    } finally {
      process.off("warning", onWarning);
    }
    expect(warnings.filter((w) => /MaxListeners|memory leak/.test(w))).toEqual([]);
  });
});
