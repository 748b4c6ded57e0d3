/**
 * The story of a pass: read the definition, observe what runs, decide the next action (planning
 * first when the decision needs the plan), then carry the action out, step by step. Every step
 * runs through `runStep`, so each says it is under way, is timed, and fails with its own reason.
 */
import { isShardctlError, messageOf } from "../errors/index.js";
import { decisionMemoryOf } from "./decision-inputs.js";
import type { Settings } from "../spec/index.js";
import type { ParseCache } from "./parse-cache.js";
import { nextAction, type NextAction } from "./next-action.js";
import type { Pass } from "./pass.js";
import { runStep, type Step } from "./run-step.js";
import { calledOff, isStalled, setConditions, type Verdict } from "./verdicts.js";
import { watchForCallOff } from "./call-off.js";
import { adopt } from "./steps/adopt.js";
import { claimPort } from "./steps/claim-port.js";
import { launch } from "./steps/launch.js";
import { observe } from "./steps/observe.js";
import { plan } from "./steps/plan.js";
import { prune } from "./steps/prune.js";
import { readDefinition } from "./steps/read-definition.js";
import { refuseHeld } from "./steps/refuse-held.js";
import { replace } from "./steps/replace.js";
import { stage, stageAhead } from "./steps/stage.js";
import { invalidDefinition, stall } from "./steps/stall.js";
import { stop } from "./steps/stop.js";
import { supervise, watch } from "./steps/supervise.js";
import { suspend } from "./steps/suspend.js";

export interface StoryParts {
  parsed: ParseCache;
  /** Drop what the daemon remembers of a pruned cluster. */
  forget: (name: string) => void;
  /** Cluster `name` now promises `model` back in the router (see coming-back.ts), when the daemon knows it. */
  promiseBack: (name: string, model: string) => void;
  /** Aborted when the daemon stops: a launch in progress is called off. */
  stopping: AbortSignal;
  /** The settings as they are now (the settings file may have changed since the pass began). */
  settingsNow: () => Promise<Settings>;
}

export type Converge = (pass: Pass) => Promise<Verdict>;

export function createConverge(parts: StoryParts): Converge {
  const read = readDefinition(parts.parsed);
  const pruneOrForget = prune(parts.forget, parts.promiseBack);

  /** The steps that carry out each decision, in order. */
  const stepsFor = (action: Exclude<NextAction, { kind: "plan" }>): Step[] => {
    switch (action.kind) {
      case "forget":
      case "prune":
        return [pruneOrForget];
      case "stall":
        return action.teardownFirst === true ? [replace, stall] : [stall];
      case "suspend":
        return [suspend];
      case "stop":
        return [stop];
      case "adopt":
        return [adopt];
      case "launch":
        return [claimPort("before-replace"), stageAhead, replace, claimPort("after-replace"), stage, launch, supervise];
    }
  };

  return async function converge(pass) {
    await runStep(pass, read);
    await runStep(pass, observe);
    const decided = await decideAfterPlanning(pass, parts);
    if ("verdict" in decided) return decided.verdict;
    const action = (pass.action = decided.action);
    // The daemon tries again (a stall lifted: an invalid edit reverted to this revision): Stalled
    // says so from now, not once the launch is over, so `shardctl wait` does not fail meanwhile.
    // A relaunch of the last valid revision lifts nothing: the definition still needs a fix. What
    // other clusters hold that the launch needs (a router name, nodes' memory) refuses it first:
    // refused again, the pass lifts nothing and says nothing of a launch.
    if (action.kind === "launch") {
      await runStep(pass, refuseHeld);
      if (action.lastValid === true) sayRelaunchingLastValid(pass);
      else liftStall(pass);
    }
    // A launch yields to a newer revision and to the daemon's stop: both are watched while its steps run.
    const watch = action.kind === "launch" ? watchForCallOff(pass, parts.parsed, parts.settingsNow, parts.stopping) : undefined;
    pass.callOff = watch?.signal;
    try {
      for (const step of stepsFor(action)) {
        if (step.yieldsToCallOff === true && watch !== undefined) {
          await watch.lookNow();
          if (watch.signal.aborted) return calledOff(pass.memory, pass.revision ?? "", step.action, watch.signal);
        }
        const verdict = await runStep(pass, step);
        if (verdict === undefined) continue;
        // The last valid revision runs again; the pass ends as the invalid definition's stall. Ready,
        // the health (unless Healthy: Degraded) and the next look are the launch's.
        if (action.kind === "launch" && action.lastValid === true && verdict.result === "success") {
          const stalled = invalidDefinition(pass, true, pass.revision);
          return { ...stalled, action: verdict.action, health: verdict.health === "Healthy" ? stalled.health : verdict.health, outcome: verdict.outcome };
        }
        return verdict;
      }
    } finally {
      watch?.stop();
    }
    throw new Error(`${pass.name}: the steps of "${action.kind}" ended without a verdict`);
  };
}

/**
 * The next action, after making the plan when the decision needs one. Planning may wait 30 s on an
 * engine's version command: it yields to a newer revision and to the daemon's stop, as a launch
 * does (the verdict of a planning called off). A plan that fails is the pass's failure, unless
 * what runs can be adopted without one.
 */
async function decideAfterPlanning(pass: Pass, parts: StoryParts): Promise<{ action: Exclude<NextAction, { kind: "plan" }> } | { verdict: Verdict }> {
  const first = decide(pass);
  if (first.kind !== "plan") return { action: first };
  watchWhilePlanning(pass);
  const planWatch = watchForCallOff(pass, parts.parsed, parts.settingsNow, parts.stopping);
  pass.callOff = planWatch.signal;
  const failure = await runStep(pass, plan)
    .then(
      () => undefined,
      (error: unknown) => error,
    )
    .finally(() => planWatch.stop());
  delete pass.callOff;
  if (failure !== undefined && planWatch.signal.aborted) return { verdict: calledOff(pass.memory, pass.revision ?? "", plan.action, planWatch.signal) };
  const action = decide(pass, failure !== undefined);
  if (failure !== undefined && action.kind === "plan") throw failure;
  if (action.kind === "plan") throw new Error(`${pass.name}: still no plan after planning`);
  if (failure !== undefined) adoptUnplanned(pass, failure);
  return { action };
}

/**
 * A launch of this very revision found running while its plan is still to be made (a daemon
 * restarted beside it) is watched while the plan is made: planning probes every node, and an
 * engine's version probe alone may take 30 s (mlx-lm importing its modules on a loaded node). A
 * death or a hang meanwhile is found, recorded and torn down as at any other time.
 */
function watchWhilePlanning(pass: Pass): void {
  const entry = pass.entry;
  const revision = pass.revision ?? pass.memory.lastGood?.revision;
  if (entry?.phase !== "running" || pass.observed?.ours !== true || entry.revision !== revision || pass.observed.gone.length > 0) return;
  watch(pass, entry);
}

/** The decision table, fed from this pass and the daemon's memory; `planFailed` when this pass could not plan. */
function decide(pass: Pass, planFailed = false): NextAction {
  const { memory, revision } = pass;
  return nextAction(
    pass.desired ?? { kind: "absent" },
    pass.observed ?? { ours: false, gone: [], dirExists: true, liveDefinitions: 0, ownEntries: 0 },
    decisionMemoryOf(memory.restarts, revision, memory.planned, planFailed),
    pass.settings,
  );
}

/** Stalled=False for a pass that launches, when a stall of this revision said the daemon had stopped trying. */
function liftStall(pass: Pass): void {
  const { memory, revision } = pass;
  if (!isStalled(memory)) return;
  setConditions(memory, revision ?? "", { Stalled: { status: "False", reason: "Launching", message: "the daemon is launching this revision" } });
}

/**
 * The definition is invalid and what the last valid one launched is lost: it is launched again.
 * Stalled says the definition is invalid from the start (the edit and the death may be seen by the
 * same pass), with the revision being relaunched.
 */
function sayRelaunchingLastValid(pass: Pass): void {
  const { memory, revision } = pass;
  const issues = pass.desired?.kind === "invalid" ? pass.desired.issues : [];
  const message = `the definition is invalid; revision ${(revision ?? "").slice(0, 12)}, the last valid one, is launched again meanwhile:\n${issues.join("\n")}`;
  setConditions(memory, revision ?? "", { Stalled: { status: "True", reason: "InvalidDefinition", message } });
  pass.world.log.warn({ cluster: pass.name, revision }, "the definition is invalid: launching the last valid revision again");
}

/**
 * What runs is adopted although its revision could not be planned: the failure is the last error
 * (kept until the cluster is Healthy again) and said in the log, and the pass after it plans again.
 */
function adoptUnplanned(pass: Pass, failure: unknown): void {
  const reason = isShardctlError(failure) ? failure.reason : "PlanFailed";
  const message = messageOf(failure);
  pass.memory.lastError = { reason, message, at: new Date().toISOString() };
  pass.world.log.warn({ cluster: pass.name, reason, err: message }, "could not plan the revision that runs: watching it without a plan");
}
