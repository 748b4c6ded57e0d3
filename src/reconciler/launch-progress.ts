/**
 * What a launch under way is doing, in words for Ready's message, from its timeline so far: a
 * status read while a launch waits (on a stage that does not listen, a coordinator loading a large
 * model, a first token that does not come) says where it is, not only that it started.
 */
import type { TimelineEvent } from "../launch/index.js";

/** "its processes are starting: 1 of 2 stages listen", "its coordinator answers /health; its first token is awaited", … */
export function describeLaunchProgress(timeline: readonly TimelineEvent[], stages: number): string {
  const steps = new Set(timeline.map((e) => e.step));
  const listening = timeline.filter((e) => /^stage-\d+-listening$/.test(e.step)).length;
  const stopped = stoppedMembers(timeline);
  const hold = stopped.length === 0 ? "" : `; ${stopped.join(", ")} ${stopped.length === 1 ? "is" : "are"} stopped, which holds the launch (see its timeline)`;
  const ended = timeline.find((e) => e.step === "launch-failed" || e.step === "launch-called-off");
  if (ended !== undefined) {
    const why = ended.detail === undefined ? "" : ` (${ended.detail.split("\n")[0]})`;
    return `its launch ${ended.step === "launch-failed" ? "failed" : "was called off"}${why}, and what it started is being torn down`;
  }
  if (steps.has("ready")) return "its launch is complete";
  if (steps.has("readiness-probe-passed")) return `it generates; it is being registered with the router${hold}`;
  if (steps.has("coordinator-healthy")) return `its coordinator answers /health; its first token is awaited${hold}`;
  if (steps.has("coordinator-started")) return `its ${stages === 1 ? "stage listens" : `${stages} stages listen`}; its coordinator is starting${hold}`;
  return `its processes are starting${listening === 0 ? "" : `: ${listening} of ${stages} ${stages === 1 ? "stage listens" : "stages listen"}`}${hold}`;
}

/** Members said paused (`stage-1-paused`, `coordinator-paused`) and not resumed since. */
function stoppedMembers(timeline: readonly TimelineEvent[]): string[] {
  const stopped = new Set<string>();
  for (const { step } of timeline) {
    const paused = /^(.+)-paused$/.exec(step);
    if (paused !== null) stopped.add(paused[1]!);
    const resumed = /^(.+)-resumed$/.exec(step);
    if (resumed !== null) stopped.delete(resumed[1]!);
  }
  return [...stopped];
}
