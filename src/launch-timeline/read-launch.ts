/**
 * What a launch under way has done so far, read from its timeline: which members started (their
 * pids), which listen (their addresses), which were seen stopped, and how far the launch got. Ready's
 * message says it in words while the launch waits (on a stage that does not listen, a coordinator
 * loading a large model, a first token that does not come), and `shardctl status` and the dashboard
 * show a launch's stages from it before the launch has cards.
 */

/**
 * A timeline event as the launch records it and the status file carries it. Written out here rather
 * than imported, so this file imports nothing and the dashboard's page reads launches with it too.
 */
export interface TimelineEntry {
  at: string;
  step: string;
  detail?: string;
}

/** One member of a launch (`stage-0`, `coordinator`), as its timeline tells it. */
export interface LaunchMember {
  pid?: string;
  /** When it was started (ISO time). */
  startedAt?: string;
  listening: boolean;
  /** Where it listens, as its `…-listening` event says. */
  address?: string;
  /** Seen stopped and not running again since. */
  stopped: boolean;
  /** Its transport address was silent from the prober (the path may be cut), as its `…-silent` event says; until it listens. */
  silent?: string;
}

export interface LaunchRead {
  /** The steps the launch reached. */
  steps: ReadonlySet<string>;
  members: ReadonlyMap<string, LaunchMember>;
  /** Stages that listen. */
  listening: number;
  /** When the last of the stages that listen began to (ISO time); absent while none does. */
  lastListeningAt?: string;
  /** Members seen stopped and not resumed, in the order they were seen. */
  stopped: readonly string[];
  /** Stages whose transport address is silent and that do not listen yet, with what their event said. */
  silent: ReadonlyArray<{ label: string; detail: string }>;
  /** The event that ended it when it failed or was called off. */
  ended?: TimelineEntry;
  /** What the coordinator's /health last answered while the launch waited, when that was neither "loading" nor ready (`answered 500: …`). */
  answered?: string;
}

/** The last launch of `timeline` (from its last `launch-started`; all of it when none is there, as a launch's own timeline starts empty). */
export function readLaunch(timeline: readonly TimelineEntry[]): LaunchRead {
  const start = timeline.map((e) => e.step).lastIndexOf("launch-started");
  const events = timeline.slice(Math.max(0, start));
  const members = new Map<string, LaunchMember>();
  const stopped = new Set<string>();
  let lastListeningAt: string | undefined;
  for (const { step, detail, at } of events) {
    const match = /^(stage-\d+|coordinator)-(started|listening|paused|resumed|silent|reached)$/.exec(step);
    if (match === null) continue;
    const label = match[1]!;
    const member = members.get(label) ?? { listening: false, stopped: false };
    members.set(label, member);
    if (match[2] === "started") {
      member.startedAt = at;
      const pid = /^pid (\d+)/.exec(detail ?? "")?.[1];
      if (pid !== undefined) member.pid = pid;
    } else if (match[2] === "listening") {
      member.listening = true;
      if (label.startsWith("stage-")) lastListeningAt = at;
      delete member.silent;
      if (detail !== undefined) member.address = detail;
    } else if (match[2] === "silent") {
      if (!member.listening) member.silent = detail ?? "its transport address does not answer";
    } else if (match[2] === "reached") {
      delete member.silent;
    } else if (match[2] === "paused") {
      member.stopped = true;
      stopped.add(label);
    } else {
      member.stopped = false;
      stopped.delete(label);
    }
  }
  const ended = events.find((e) => e.step === "launch-failed" || e.step === "launch-called-off");
  // The last one (a loop rather than findLast: the dashboard's page is built for ES2022).
  let answered: string | undefined;
  for (const e of events) if (e.step === "coordinator-answered") answered = e.detail;
  const listening = [...members].filter(([label, m]) => label.startsWith("stage-") && m.listening).length;
  const silent = [...members].flatMap(([label, m]) => (m.silent === undefined ? [] : [{ label, detail: m.silent }]));
  return {
    steps: new Set(events.map((e) => e.step)),
    members,
    listening,
    ...(lastListeningAt === undefined ? {} : { lastListeningAt }),
    stopped: [...stopped],
    silent,
    ...(ended === undefined ? {} : { ended }),
    ...(answered === undefined ? {} : { answered }),
  };
}

/** What of a status tells whether its launch stands in for its stage cards. */
export interface LaunchedStatus {
  stages: readonly unknown[];
  timeline: readonly TimelineEntry[];
  conditions: ReadonlyArray<{ type: string; reason: string }>;
}

/**
 * The launch whose timeline stands in for a status's stage cards while it has none: one under way
 * (started, not failed or called off), until the daemon has looked at what it started. A launch
 * that reached "ready" while Ready still says Launching is in that gap: the status written at its
 * last step carries no cards yet, and without the launch its stages would read as dead, or not
 * running, 0 of N up, for the moment until the first cards are written.
 */
export function launchInPlaceOfCards(status: LaunchedStatus): LaunchRead | undefined {
  if (status.stages.length > 0 || !status.timeline.some((e) => e.step === "launch-started")) return undefined;
  const launch = readLaunch(status.timeline);
  if (launch.ended !== undefined) return undefined;
  return !launch.steps.has("ready") || status.conditions.some((c) => c.type === "Ready" && c.reason === "Launching") ? launch : undefined;
}

/**
 * "its processes are starting: 1 of 2 stages listen", "its coordinator answers /health; its first
 * token is awaited", … `ring`: the engine's ranks form a ring and serve from the last one, with no
 * coordinator process to start (mlx-lm).
 */
export function describeLaunchProgress(timeline: readonly TimelineEntry[], stages: number, { ring }: { ring: boolean }): string {
  const { steps, listening, lastListeningAt, stopped, silent, ended, answered } = readLaunch(timeline);
  const holds = [
    ...(stopped.length === 0 ? [] : [`${stopped.join(", ")} ${stopped.length === 1 ? "is" : "are"} stopped, which holds the launch (see its timeline)`]),
    ...silent.map(({ label, detail }) => `${label} runs, but ${detail}`),
  ];
  const hold = holds.map((h) => `; ${h}`).join("");
  if (ended !== undefined) {
    const why = ended.detail === undefined ? "" : ` (${ended.detail.split("\n")[0]})`;
    return `its launch ${ended.step === "launch-failed" ? "failed" : "was called off"}${why}, and what it started is being torn down`;
  }
  if (steps.has("ready")) return "its launch is complete";
  if (steps.has("readiness-probe-passed")) return `it generates; it is being registered with the router${hold}`;
  if (steps.has("coordinator-healthy")) return `its coordinator answers /health; its first token is awaited${hold}`;
  if (steps.has("coordinator-started")) {
    const said = answered === undefined ? "" : `; its /health ${answered}`;
    return `its ${stages === 1 ? "stage listens" : `${stages} stages listen`}; its coordinator is starting${said}${hold}`;
  }
  // Every stage listens and nothing serves yet: an engine without a coordinator process (a ring of
  // ranks: mlx-lm) answers /health only once every rank has joined the ring, which a rank cut off
  // from its neighbour never does. Said apart from "starting", with since when, or a partition reads
  // as "2 of 2 stages listen" until the launch's deadline.
  if (ring && listening > 0 && listening >= stages && lastListeningAt !== undefined) {
    return `its ${stages === 1 ? "stage listens" : `${stages} stages listen`} (all since ${lastListeningAt.slice(11, 19)} UTC); nothing answers /health yet (ranks that form a ring answer once every rank has joined it)${hold}`;
  }
  return `its processes are starting${listening === 0 ? "" : `: ${listening} of ${stages} ${stages === 1 ? "stage listens" : "stages listen"}`}${hold}`;
}
