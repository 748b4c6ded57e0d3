import { describe, expect, test, vi } from "vitest";
import { WorkQueue, type PassOutcome } from "../../src/reconciler/index.js";

/** A pass that takes `ms` and records start/end, with a per-key outcome. */
function recorder(ms: number, outcomeOf: (key: string, n: number) => PassOutcome = () => ({ kind: "done" })) {
  const events: string[] = [];
  const starts = new Map<string, number[]>();
  let inFlight = 0;
  let maxInFlight = 0;
  const perKeyInFlight = new Map<string, number>();
  let overlapSameKey = false;
  const pass = async (key: string): Promise<PassOutcome> => {
    const n = (starts.get(key) ?? []).length;
    starts.set(key, [...(starts.get(key) ?? []), Date.now()]);
    inFlight++;
    maxInFlight = Math.max(maxInFlight, inFlight);
    perKeyInFlight.set(key, (perKeyInFlight.get(key) ?? 0) + 1);
    if (perKeyInFlight.get(key)! > 1) overlapSameKey = true;
    events.push(`start ${key}`);
    await new Promise((r) => setTimeout(r, ms));
    events.push(`end ${key}`);
    perKeyInFlight.set(key, perKeyInFlight.get(key)! - 1);
    inFlight--;
    return outcomeOf(key, n);
  };
  return { pass, events, starts, max: () => maxInFlight, overlapSameKey: () => overlapSameKey };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("WorkQueue", () => {
  test("coalesces rapid adds of one key: one pass now, one more after it (latest wins)", async () => {
    const r = recorder(50);
    const queue = new WorkQueue(r.pass);
    for (let i = 0; i < 100; i++) queue.add("a");
    await sleep(10);
    // Added while its pass runs: exactly one more pass afterwards, however many adds.
    for (let i = 0; i < 100; i++) queue.add("a");
    await sleep(5);
    await queue.whenIdle();
    expect(r.starts.get("a")).toHaveLength(2);
    expect(r.events).toEqual(["start a", "end a", "start a", "end a"]);
    await queue.stop();
  });

  test("never runs one key twice at once, runs different keys in parallel up to the concurrency", async () => {
    const r = recorder(40);
    const queue = new WorkQueue(r.pass, { concurrency: 3 });
    for (let round = 0; round < 5; round++) {
      for (const key of ["a", "b", "c", "d", "e"]) queue.add(key);
      await sleep(15);
    }
    await queue.whenIdle();
    expect(r.overlapSameKey()).toBe(false);
    expect(r.max()).toBe(3);
    for (const key of ["a", "b", "c", "d", "e"]) expect(r.starts.get(key)!.length).toBeGreaterThanOrEqual(1);
    await queue.stop();
  });

  // Back-off is about timer delays: fake timers make it exact instead of racing a loaded machine.
  // Math.random pinned near 1 puts each jittered delay at the top of its range [d/2, d).
  test("a pass that steps aside gives its slot back: other keys run meanwhile, its own key still never twice at once", async () => {
    const events: string[] = [];
    let release: () => void = () => undefined;
    const waiting = new Promise<void>((r) => (release = r));
    const queue = new WorkQueue(
      async (key, stepAside) => {
        events.push(`start ${key}`);
        if (key.startsWith("stuck")) {
          stepAside();
          stepAside(); // a second call changes nothing
          await waiting;
        }
        events.push(`end ${key}`);
        return { kind: "done" };
      },
      { concurrency: 2 },
    );
    for (const key of ["stuck-1", "stuck-2", "stuck-3", "delete-me"]) queue.add(key);
    await sleep(50);
    // Every stuck pass stepped aside, so the fourth key ran although two slots were taken first.
    expect(events).toEqual(["start stuck-1", "start stuck-2", "start stuck-3", "start delete-me", "end delete-me"]);
    // A stuck key added again waits for its own pass, whatever slots are free.
    queue.add("stuck-1");
    await sleep(50);
    expect(events.filter((e) => e === "start stuck-1")).toHaveLength(1);
    release();
    await sleep(20);
    await queue.whenIdle();
    expect(events.filter((e) => e === "start stuck-1")).toHaveLength(2);
  });

  test("without stepping aside, passes beyond the concurrency wait for a slot", async () => {
    const events: string[] = [];
    let release: () => void = () => undefined;
    const waiting = new Promise<void>((r) => (release = r));
    const queue = new WorkQueue(
      async (key) => {
        events.push(`start ${key}`);
        if (key.startsWith("busy")) await waiting;
        return { kind: "done" };
      },
      { concurrency: 2 },
    );
    for (const key of ["busy-1", "busy-2", "other"]) queue.add(key);
    await sleep(50);
    expect(events).toEqual(["start busy-1", "start busy-2"]);
    release();
    await queue.whenIdle();
    expect(events).toContain("start other");
  });

  test("backs off exponentially on retry and resets after a success", async () => {
    vi.useFakeTimers();
    vi.spyOn(Math, "random").mockReturnValue(0.999);
    try {
      // Fail three times, then succeed; base 40 ms: delays just under 40, 80 and 160 ms.
      const r = recorder(0, (_key, n) => (n < 3 ? { kind: "retry" } : { kind: "done" }));
      const queue = new WorkQueue(r.pass, { baseDelayMs: 40, maxDelayMs: 1000 });
      queue.add("k");
      await vi.advanceTimersByTimeAsync(1);
      expect(r.starts.get("k")).toHaveLength(1);
      await vi.advanceTimersByTimeAsync(40);
      expect(r.starts.get("k")).toHaveLength(2);
      await vi.advanceTimersByTimeAsync(75);
      expect(r.starts.get("k")).toHaveLength(2); // the second delay is ~80 ms, not the base again
      await vi.advanceTimersByTimeAsync(5);
      expect(r.starts.get("k")).toHaveLength(3);
      await vi.advanceTimersByTimeAsync(155);
      expect(r.starts.get("k")).toHaveLength(3);
      await vi.advanceTimersByTimeAsync(5);
      expect(r.starts.get("k")).toHaveLength(4);
      await vi.advanceTimersByTimeAsync(10_000);
      expect(r.starts.get("k")).toHaveLength(4); // succeeded: no more passes
      await queue.stop();
    } finally {
      vi.restoreAllMocks();
      vi.useRealTimers();
    }
  });

  test("a success resets the key's failure count (the next failure backs off from the base again)", async () => {
    vi.useFakeTimers();
    vi.spyOn(Math, "random").mockReturnValue(0.999);
    try {
      // fail, fail, succeed, then (after an add) fail: the last retry waits ~base, not 4×base.
      const outcomes: PassOutcome["kind"][] = ["retry", "retry", "done", "retry", "done"];
      const r = recorder(0, (_key, n) => ({ kind: outcomes[n] ?? "done" }) as PassOutcome);
      const queue = new WorkQueue(r.pass, { baseDelayMs: 60, maxDelayMs: 10_000 });
      queue.add("k");
      await vi.advanceTimersByTimeAsync(1_000);
      expect(r.starts.get("k")).toHaveLength(3);
      queue.add("k");
      await vi.advanceTimersByTimeAsync(1);
      expect(r.starts.get("k")).toHaveLength(4);
      await vi.advanceTimersByTimeAsync(61);
      expect(r.starts.get("k")).toHaveLength(5);
      await queue.stop();
    } finally {
      vi.restoreAllMocks();
      vi.useRealTimers();
    }
  });

  test("forgetFailures resets the back-off; add cancels a pending delayed retry", async () => {
    const r = recorder(1, () => ({ kind: "retry" }));
    const queue = new WorkQueue(r.pass, { baseDelayMs: 5_000 });
    queue.add("k");
    await sleep(30);
    expect(r.starts.get("k")).toHaveLength(1);
    // The retry is 2.5-5 s away; an event (definition changed) asks now.
    queue.forgetFailures("k");
    queue.add("k");
    await sleep(30);
    expect(r.starts.get("k")).toHaveLength(2);
    await queue.stop();
  });

  test("requeue outcomes come back after their delay; stall outcomes wait for the next add", async () => {
    const r = recorder(1, (key, n) => (key === "req" && n === 0 ? { kind: "requeue", afterMs: 50 } : key === "st" ? { kind: "stall" } : { kind: "done" }));
    const queue = new WorkQueue(r.pass);
    queue.add("req");
    queue.add("st");
    await sleep(200);
    expect(r.starts.get("req")).toHaveLength(2);
    expect(r.starts.get("st")).toHaveLength(1);
    await queue.stop();
  });

  test("a pass that throws is retried with back-off; stop waits for the pass in flight and takes no more work", async () => {
    let calls = 0;
    const queue = new WorkQueue(
      async () => {
        calls++;
        if (calls === 1) throw new Error("boom");
        await sleep(80);
        return { kind: "done" };
      },
      { baseDelayMs: 20 },
    );
    queue.add("k");
    await sleep(60);
    expect(calls).toBe(2);
    const stopped = Date.now();
    await queue.stop();
    expect(Date.now() - stopped).toBeGreaterThanOrEqual(10);
    queue.add("k");
    await sleep(30);
    expect(calls).toBe(2);
  });
});
