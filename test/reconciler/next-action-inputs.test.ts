/** The inputs of the decision table that the daemon's pass and `shardctl diff` / `wait` both make with these functions. */
import { describe, expect, it } from "vitest";
import { decisionMemoryOf, isOwnedBy, launchCountOf, observedStateOf } from "../../src/reconciler/index.js";

const dir = "/defs";
const entry = (owner?: string) => ({ revision: "a".repeat(64), identity: "i".repeat(64), phase: "running" as const, ...(owner === undefined ? {} : { owner }) });

describe("isOwnedBy", () => {
  it("owns what was launched from its directory, and what was launched before owners were recorded", () => {
    expect(isOwnedBy({ owner: dir }, dir)).toBe(true);
    expect(isOwnedBy({}, dir)).toBe(true);
    expect(isOwnedBy({ owner: "/defs/" }, dir)).toBe(false);
    expect(isOwnedBy({ owner: "/elsewhere" }, dir)).toBe(false);
  });
});

describe("observedStateOf", () => {
  it("nothing runs: not ours; the prune guard not looked at counts the directory present and empty", () => {
    expect(observedStateOf(undefined, dir)).toEqual({ ours: false, gone: [], dirExists: true, liveDefinitions: 0, ownEntries: 0 });
  });

  it("what runs, by the ownership rule, with the processes gone and the prune guard's view when given", () => {
    expect(observedStateOf(entry("/elsewhere"), dir, { gone: ["stage 0"] })).toEqual({
      entry: entry("/elsewhere"),
      ours: false,
      gone: ["stage 0"],
      dirExists: true,
      liveDefinitions: 0,
      ownEntries: 0,
    });
    expect(observedStateOf(entry(), dir, { directory: { exists: false, liveDefinitions: 2, ownEntries: 3 } })).toMatchObject({
      ours: true,
      dirExists: false,
      liveDefinitions: 2,
      ownEntries: 3,
    });
  });
});

describe("launchCountOf and decisionMemoryOf", () => {
  it("count the launches of this revision only, and summarize the plan for the decision", () => {
    const restarts = { revision: "r1", count: 2 };
    expect(launchCountOf(restarts, "r1")).toBe(2);
    expect(launchCountOf(restarts, "r2")).toBe(0);
    expect(launchCountOf(undefined, "r1")).toBe(0);
    expect(launchCountOf(restarts, undefined)).toBe(0);
    expect(decisionMemoryOf(restarts, "r1", undefined)).toEqual({ launches: 2 });
    const errors = [{ reason: "StageDoesNotFit", message: "too big" }];
    const planned = { revision: "r1", identity: "id", plan: { feasible: false, errors, stages: [] } } as unknown as Parameters<typeof decisionMemoryOf>[2];
    expect(decisionMemoryOf(restarts, "r2", planned)).toEqual({ launches: 0, planned: { revision: "r1", feasible: false, errors, identity: "id" } });
  });
});
