/** The reconciler's decision table, row by row: what the daemon and `shardctl diff` both decide. */
import { describe, expect, it } from "vitest";
import { nextAction, type DecisionMemory, type DesiredState, type NextAction, type ObservedState } from "../../src/reconciler/index.js";

const revision = "a".repeat(64);
const other = "b".repeat(64);
const identity = "i".repeat(64);

const running = (overrides: Partial<NonNullable<ObservedState["entry"]>> = {}): NonNullable<ObservedState["entry"]> => ({
  revision,
  identity,
  phase: "running",
  ...overrides,
});
const defined = (overrides: Partial<Extract<DesiredState, { kind: "defined" }>> = {}): DesiredState => ({
  kind: "defined",
  revision,
  desired: "running",
  suspend: false,
  ...overrides,
});
const lastGood = (overrides: Partial<Extract<DesiredState, { kind: "defined" }>> = {}): Extract<DesiredState, { kind: "defined" }> => ({
  kind: "defined",
  revision,
  desired: "running",
  suspend: false,
  ...overrides,
});
const observed = (overrides: Partial<ObservedState> = {}): ObservedState => ({ ours: true, gone: [], dirExists: true, liveDefinitions: 1, ownEntries: 1, ...overrides });
const planned = (overrides: Partial<NonNullable<DecisionMemory["planned"]>> = {}): DecisionMemory => ({
  launches: 0,
  planned: { revision, feasible: true, errors: [], identity, ...overrides },
});
const settings = (overrides: { restartBudget?: number; allowMassPrune?: boolean; enabled?: boolean } = {}) => ({
  daemon: { restartBudget: overrides.restartBudget ?? 3, allowMassPrune: overrides.allowMassPrune ?? false },
  distributed: { enabled: overrides.enabled ?? true },
});

type Row = [string, DesiredState, ObservedState, DecisionMemory, ReturnType<typeof settings>, NextAction];

const rows: Row[] = [
  // A missing definition: prune what is ours, never on a missing directory or an emptied one.
  ["absent, nothing runs", { kind: "absent" }, observed(), { launches: 0 }, settings(), { kind: "forget" }],
  [
    "absent, another daemon's cluster runs",
    { kind: "absent" },
    observed({ entry: running({ owner: "/elsewhere" }), ours: false }),
    { launches: 0 },
    settings(),
    { kind: "forget" },
  ],
  ["absent, ours runs", { kind: "absent" }, observed({ entry: running(), liveDefinitions: 3, ownEntries: 2 }), { launches: 0 }, settings(), { kind: "prune" }],
  [
    "absent, the directory is gone",
    { kind: "absent" },
    observed({ entry: running(), dirExists: false }),
    { launches: 0 },
    settings(),
    { kind: "stall", reason: "DefinitionsDirMissing", serving: true },
  ],
  [
    "absent, directory emptied while two run",
    { kind: "absent" },
    observed({ entry: running(), liveDefinitions: 0, ownEntries: 2 }),
    { launches: 0 },
    settings(),
    { kind: "stall", reason: "MassPruneRefused", serving: true },
  ],
  [
    "absent, directory emptied, mass prune allowed",
    { kind: "absent" },
    observed({ entry: running(), liveDefinitions: 0, ownEntries: 2 }),
    { launches: 0 },
    settings({ allowMassPrune: true }),
    { kind: "prune" },
  ],
  [
    "absent, directory emptied while only this one runs",
    { kind: "absent" },
    observed({ entry: running(), liveDefinitions: 0, ownEntries: 1 }),
    { launches: 0 },
    settings(),
    { kind: "prune" },
  ],
  // An invalid definition keeps whatever runs.
  [
    "invalid while serving",
    { kind: "invalid", issues: ["x"] },
    observed({ entry: running() }),
    { launches: 0 },
    settings(),
    { kind: "stall", reason: "InvalidDefinition", serving: true },
  ],
  ["invalid, nothing runs", { kind: "invalid", issues: ["x"] }, observed(), { launches: 0 }, settings(), { kind: "stall", reason: "InvalidDefinition", serving: false }],
  // ...and is never applied, while the last valid one is kept: launched again once what it launched is lost.
  [
    "invalid, the last valid revision serves",
    { kind: "invalid", issues: ["x"], lastGood: lastGood() },
    observed({ entry: running() }),
    planned(),
    settings(),
    { kind: "stall", reason: "InvalidDefinition", serving: true },
  ],
  [
    "invalid, the last valid revision died and was torn down",
    { kind: "invalid", issues: ["x"], lastGood: lastGood() },
    observed(),
    planned(),
    settings(),
    { kind: "launch", lastValid: true },
  ],
  [
    "invalid, a process of the last valid revision is gone",
    { kind: "invalid", issues: ["x"], lastGood: lastGood() },
    observed({ entry: running(), gone: ["stage-0"] }),
    planned(),
    settings(),
    { kind: "launch", replace: { revision, phase: "running", gone: ["stage-0"] }, lastValid: true },
  ],
  [
    "invalid, the last valid revision not planned by this daemon yet",
    { kind: "invalid", issues: ["x"], lastGood: lastGood() },
    observed(),
    { launches: 0 },
    settings(),
    { kind: "plan" },
  ],
  [
    "invalid, the last valid revision's budget is spent",
    { kind: "invalid", issues: ["x"], lastGood: lastGood() },
    observed(),
    { ...planned(), launches: 3 },
    settings(),
    { kind: "stall", reason: "InvalidDefinition", serving: false },
  ],
  [
    "invalid, the last valid revision broken and its budget spent: tear down, then stall",
    { kind: "invalid", issues: ["x"], lastGood: lastGood() },
    observed({ entry: running(), gone: ["stage-0"] }),
    { ...planned(), launches: 3 },
    settings(),
    { kind: "stall", reason: "InvalidDefinition", serving: false, teardownFirst: true },
  ],
  [
    "invalid, the last valid one says stopped",
    { kind: "invalid", issues: ["x"], lastGood: lastGood({ desired: "stopped" }) },
    observed(),
    planned(),
    settings(),
    { kind: "stall", reason: "InvalidDefinition", serving: false },
  ],
  [
    "invalid, an older revision serves while the last valid one waited to launch: never replaced",
    { kind: "invalid", issues: ["x"], lastGood: lastGood() },
    observed({ entry: running({ revision: other, identity: other }) }),
    planned(),
    settings(),
    { kind: "stall", reason: "InvalidDefinition", serving: true },
  ],
  [
    "invalid, the last valid plan infeasible while an older revision serves",
    { kind: "invalid", issues: ["x"], lastGood: lastGood() },
    observed({ entry: running({ revision: other, identity: other }) }),
    planned({ feasible: false }),
    settings(),
    { kind: "stall", reason: "InvalidDefinition", serving: true },
  ],
  // Suspended: nothing at all, even for another daemon's cluster.
  ["suspended", defined({ suspend: true }), observed({ entry: running() }), { launches: 0 }, settings(), { kind: "suspend" }],
  [
    "another daemon's cluster of this name",
    defined(),
    observed({ entry: running({ owner: "/elsewhere" }), ours: false }),
    planned(),
    settings(),
    { kind: "stall", reason: "ClusterOwnedElsewhere", serving: false },
  ],
  // Stop: before any plan is needed.
  [
    "desired stopped, running",
    defined({ desired: "stopped" }),
    observed({ entry: running() }),
    { launches: 0 },
    settings(),
    { kind: "stop", why: "Stopped", teardown: true },
  ],
  ["desired stopped, nothing runs", defined({ desired: "stopped" }), observed(), { launches: 0 }, settings(), { kind: "stop", why: "Stopped", teardown: false }],
  // Plan once per revision, then judge it.
  ["no plan yet", defined(), observed(), { launches: 0 }, settings(), { kind: "plan" }],
  ["a plan of an older revision", defined(), observed(), planned({ revision: other }), settings(), { kind: "plan" }],
  // The plan could not be made (a node that cannot be probed): what runs at this revision is watched without it.
  ["plan failed, running at this revision", defined(), observed({ entry: running() }), { launches: 1, planFailed: true }, settings(), { kind: "adopt", inPlace: false }],
  [
    "plan failed, running at this revision with a process gone",
    defined(),
    observed({ entry: running(), gone: ["stage-0"] }),
    { launches: 1, planFailed: true },
    settings(),
    { kind: "adopt", inPlace: false },
  ],
  ["plan failed, nothing runs", defined(), observed(), { launches: 0, planFailed: true }, settings(), { kind: "plan" }],
  [
    "plan failed, running at another revision",
    defined(),
    observed({ entry: running({ revision: other }) }),
    { launches: 0, planFailed: true },
    settings(),
    { kind: "plan" },
  ],
  [
    "plan failed, leftovers tearing down",
    defined(),
    observed({ entry: running({ phase: "tearing-down" }) }),
    { launches: 1, planFailed: true },
    settings(),
    { kind: "plan" },
  ],
  [
    "infeasible plan while serving",
    defined(),
    observed({ entry: running() }),
    planned({ feasible: false }),
    settings(),
    { kind: "stall", reason: "PlanInfeasible", serving: true },
  ],
  [
    "distributed serving off, running",
    defined(),
    observed({ entry: running() }),
    planned(),
    settings({ enabled: false }),
    { kind: "stop", why: "DistributedDisabled", teardown: true },
  ],
  [
    "distributed serving off, nothing runs",
    defined(),
    observed(),
    planned(),
    settings({ enabled: false }),
    { kind: "stop", why: "DistributedDisabled", teardown: false },
  ],
  // Adopt what runs from the same launch; apply a router-only revision in place.
  ["running at this revision", defined(), observed({ entry: running() }), planned(), settings(), { kind: "adopt", inPlace: false }],
  ["running at another revision, same identity", defined(), observed({ entry: running({ revision: other }) }), planned(), settings(), { kind: "adopt", inPlace: true }],
  // Replace what runs at another identity, broken or half-done.
  [
    "running at another identity",
    defined(),
    observed({ entry: running({ revision: other, identity: "j".repeat(64) }) }),
    planned(),
    settings(),
    { kind: "launch", replace: { revision: other, phase: "running", gone: [] } },
  ],
  [
    "a stage definitely gone",
    defined(),
    observed({ entry: running(), gone: ["stage 1"] }),
    planned(),
    settings(),
    { kind: "launch", replace: { revision, phase: "running", gone: ["stage 1"] } },
  ],
  [
    "an interrupted launch",
    defined(),
    observed({ entry: running({ phase: "launching" }) }),
    planned(),
    settings(),
    { kind: "launch", replace: { revision, phase: "launching", gone: [] } },
  ],
  // The restart budget.
  ["nothing runs, budget left", defined(), observed(), { ...planned(), launches: 2 }, settings(), { kind: "launch" }],
  ["nothing runs, budget spent", defined(), observed(), { ...planned(), launches: 3 }, settings(), { kind: "stall", reason: "RestartBudgetExhausted", serving: false }],
  [
    "broken, budget spent: tear down, then stall",
    defined(),
    observed({ entry: running(), gone: ["coordinator"] }),
    { ...planned(), launches: 3 },
    settings(),
    { kind: "stall", reason: "RestartBudgetExhausted", serving: false, teardownFirst: true },
  ],
  ["healthy, budget spent: keep it", defined(), observed({ entry: running() }), { ...planned(), launches: 3 }, settings(), { kind: "adopt", inPlace: false }],
];

describe("nextAction", () => {
  it.each(rows)("%s", (_name, desired, seen, memory, config, expected) => {
    expect(nextAction(desired, seen, memory, config)).toEqual(expected);
  });
});
