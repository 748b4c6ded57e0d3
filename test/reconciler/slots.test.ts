import { expect, test } from "vitest";
import { NodePlaces } from "../../src/reconciler/queue/node-places.js";
import { Slots } from "../../src/reconciler/queue/slots.js";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

test("at most `size` run at once; the others wait their turn in order; one called off while it waits never runs", async () => {
  const slots = new Slots(2);
  const started: string[] = [];
  const releases = new Map<string, () => void>();
  const work = (name: string) => () =>
    new Promise<string>((resolve) => {
      started.push(name);
      releases.set(name, () => resolve(name));
    });
  const cancel = new AbortController();
  const runs = [slots.run(work("a")), slots.run(work("b")), slots.run(work("c"), cancel.signal), slots.run(work("d"))];
  await sleep(20);
  expect(started).toEqual(["a", "b"]);
  expect(slots.queued).toBe(2);
  cancel.abort();
  expect(await runs[2]).toEqual({ ran: false });
  expect(slots.queued).toBe(1);
  releases.get("a")!();
  expect(await runs[0]).toEqual({ ran: true, value: "a" });
  await sleep(20);
  expect(started).toEqual(["a", "b", "d"]);
  releases.get("b")!();
  releases.get("d")!();
  expect(await Promise.all([runs[1], runs[3]])).toEqual([
    { ran: true, value: "b" },
    { ran: true, value: "d" },
  ]);
  // A slot freed by work that failed is taken by the next.
  await expect(slots.run(() => Promise.reject(new Error("boom")))).rejects.toThrow("boom");
  expect(await slots.run(async () => "after")).toEqual({ ran: true, value: "after" });
});

test("staging places are per node: one node's full places hold back none of another's; a release lets the next of that node in", async () => {
  const places = new NodePlaces(1);
  const first = await places.acquire("n1");
  expect(places.full("n1")).toBe(true);
  expect(places.full("n2")).toBe(false);
  // Another node's place is given at once.
  const other = await places.acquire("n2");
  expect(other).toBeTypeOf("function");
  let second: (() => void) | undefined;
  const waiting = places.acquire("n1").then((release) => (second = release));
  await sleep(20);
  expect(second).toBeUndefined();
  first!();
  await waiting;
  expect(second).toBeTypeOf("function");
  // One called off while it waits gets none.
  const cancel = new AbortController();
  const cancelled = places.acquire("n1", cancel.signal);
  cancel.abort();
  expect(await cancelled).toBeUndefined();
});
