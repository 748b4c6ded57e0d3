/**
 * One card per planned stage (and the coordinator's): node, layer range, process liveness and the
 * transport port's state, from the status's stage cards. While a launch is under way (no cards yet)
 * its timeline tells each stage's pid and whether it listens, as `shardctl status` shows it. A stage
 * with neither is not running; each member the last death names (Ready's reason, then the last
 * error), the coordinator included, is marked dead with its part of the message until the relaunch
 * starts it again.
 */
import { launchInPlaceOfCards, type LaunchMember } from "../../../launch-timeline/index.js";
import { formatAge } from "../format.js";
import type { StageCardView, StatusView } from "../status-types.js";
import { UrlText } from "./url-text.js";

export type CardState = "healthy" | "degraded" | "dead" | "down" | "starting";

export interface StageCardModel {
  index: number;
  node: string;
  layers: [number, number];
  card?: StageCardView;
  /** What the launch under way says of the stage, when it has no card yet. */
  launching?: LaunchMember;
  state: CardState;
  /** The pill's word when the state's own does not say it (a stage on an unobservable node). */
  word?: string;
  note: string;
}

/** Why a running cluster is torn down (the health monitor's reasons). */
const deathReasons = new Set(["StageDied", "CoordinatorDied", "StagePortClosed", "CoordinatorUnhealthy", "GenerationHung", "GenerationFailed", "ProcessStopped"]);

export interface Death {
  reason: string;
  /** "stage-0" or "coordinator" → its part of the message, first the one that went first. */
  members: Map<string, string>;
}

/**
 * The death that took the cluster down, as Ready says it, then (while staging and launching again)
 * as the last error, and once the budget is spent as the last restart evidence; with the members
 * its message names. A death names each member in a part of
 * its own, the one that went silent first: "stage-0 on n1 stopped answering (…); stage-1 on n2: pid
 * … exited because its upstream went silent (…)", or "coordinator on local stopped answering (…);
 * stage-0 on n1: …". Matching only the first words marked one card, and none once the rewording
 * named the coordinator, while the stage that exited lost its mark.
 */
export function deathOf(status: StatusView): Death | undefined {
  const ready = status.conditions.find((c) => c.type === "Ready");
  // A cluster stalled on its spent budget says RestartBudgetExhausted: the death that spent it is
  // the last piece of restart evidence.
  const stalled = ready?.status === "False" && (ready.reason === "RestartBudgetExhausted" || status.lastError?.reason === "RestartBudgetExhausted");
  const lastEvidence = stalled ? status.restarts?.evidence.at(-1) : undefined;
  const candidates = [ready?.status === "False" ? ready : undefined, ready?.status === "True" ? undefined : status.lastError, lastEvidence];
  for (const d of candidates) {
    if (d === undefined || !deathReasons.has(d.reason)) continue;
    const members = new Map<string, string>();
    for (const part of d.message.split("; ")) {
      const named = /^(stage-\d+|coordinator) on \S/.exec(part);
      if (named !== null && !members.has(named[1]!)) members.set(named[1]!, part);
    }
    if (members.size > 0) return { reason: d.reason, members };
  }
  return undefined;
}

/** A running stage's card as the status's probe saw it. */
function cardOf(index: number, node: string, layers: [number, number], card: StageCardView): StageCardModel {
  if (card.liveness === "unknown") return { index, node, layers, card, state: "degraded", note: "liveness unknown: its node does not answer" };
  if (!card.alive) return { index, node, layers, card, state: "dead", note: "process gone" };
  if (card.transport !== "listening" && card.transport !== "not-probed") return { index, node, layers, card, state: "degraded", note: `transport ${card.transport}` };
  return {
    index,
    node,
    layers,
    card,
    state: "healthy",
    note: card.transport === "not-probed" ? "alive (a ring port is never probed)" : "alive, transport listening",
  };
}

/**
 * The nodes the daemon cannot ask, each with why: those an Unknown NodeUnobservable condition names
 * ("node n2 (stage-1) is unobservable over SSH: …"), and every node of a cluster Ready Unknown
 * DaemonCutOff names ("the daemon reaches none of this cluster's nodes (n1, n2) and …"). The stage
 * cards it last wrote for them are old news.
 */
function unobservableNodesOf(status: StatusView): Map<string, string> {
  const nodes = new Map<string, string>();
  for (const c of status.conditions) {
    if (c.status !== "Unknown") continue;
    if (c.reason === "NodeUnobservable")
      for (const named of c.message.matchAll(/node (\S+) \([^)]*\) is unobservable/g)) nodes.set(named[1]!, "does not answer over SSH");
    if (c.type === "Ready" && c.reason === "DaemonCutOff") {
      const named = /reaches none of this cluster's nodes \(([^)]*)\)/.exec(c.message);
      for (const node of named?.[1]?.split(", ") ?? [])
        nodes.set(node, "does not answer the daemon, nor does any node of the cluster (the daemon's own network, most likely)");
    }
  }
  return nodes;
}

/** A member of the launch under way, before it has a card: started, listening, or seen stopped. */
function launchLook(member: LaunchMember): { state: CardState; word: string; note: string } {
  if (member.stopped) return { state: "degraded", word: "Stopped", note: "being launched; seen stopped, which holds the launch" };
  if (member.listening) return { state: "starting", word: "Listening", note: `being launched: listening${member.address === undefined ? "" : ` on ${member.address}`}` };
  return { state: "starting", word: "Starting", note: "being launched: started, not listening yet" };
}

/** The coordinator of the launch under way: as a stage, and past listening, how far the launch got with it. */
function coordinatorLaunchLook(member: LaunchMember, steps: ReadonlySet<string>): { state: CardState; word: string; note: string } {
  if (member.stopped) return launchLook(member);
  if (steps.has("ready")) return { state: "starting", word: "Generates", note: "launched: it generates and is registered; its card comes with the daemon's next look" };
  if (steps.has("readiness-probe-passed")) return { state: "starting", word: "Generates", note: "being launched: it generates; it is being registered with the router" };
  if (steps.has("coordinator-healthy")) return { state: "starting", word: "Answers", note: "being launched: /health answers 200; its first token is awaited" };
  return launchLook(member);
}

export function stageCardsOf(status: StatusView): StageCardModel[] {
  const live = new Map(status.stages.map((s) => [s.index, s]));
  // A launch under way has no cards yet: its timeline is newer than any death the status still names.
  const launch = launchInPlaceOfCards(status);
  const death = deathOf(status);
  const unobservable = unobservableNodesOf(status);
  // A teardown under way: what has no card is being stopped (it may run a few seconds more), not "not running".
  const tearingDown = status.conditions.some((c) => c.type === "StagesListening" && c.reason === "TearingDown");
  const planned = status.plan?.stages ?? status.stages;
  return planned.map(({ index, node, layers }) => {
    const card = live.get(index);
    if (card !== undefined) {
      const seen = cardOf(index, node, layers, card);
      // The status's card is the last sight of a stage on a node the daemon cannot reach: not a Healthy stage now.
      const why = unobservable.get(node);
      if (seen.state === "healthy" && why !== undefined) {
        return { ...seen, state: "degraded", word: "Unobservable", note: `node ${node} ${why}: last seen ${seen.note}` };
      }
      return seen;
    }
    const member = launch?.members.get(`stage-${index}`);
    if (member !== undefined) return { index, node, layers, launching: member, ...launchLook(member) };
    // The death that took the cluster down stays on the card of every member it names until a
    // relaunch starts the stage again.
    const part = death?.members.get(`stage-${index}`);
    if (death !== undefined && part !== undefined) return { index, node, layers, state: "dead", note: `${death.reason}: ${part}` };
    return { index, node, layers, state: "down", note: tearingDown ? "being stopped" : status.desired === "stopped" ? "stopped" : "not running" };
  });
}

const stateWords: Record<CardState, string> = { healthy: "Healthy", degraded: "Degraded", dead: "Dead", down: "Not running", starting: "Starting" };

/**
 * The coordinator's card by its health. "unknown" (the probe got no answer: a busy moment, a frozen
 * process, a restarted daemon that has not heard it yet) is not "down": amber, not the red of a death.
 */
const coordinatorLook: Record<NonNullable<StatusView["coordinator"]>["health"], { state: string; word: string; note: string }> = {
  ok: { state: "healthy", word: "Healthy", note: "/health answers 200" },
  loading: { state: "degraded", word: "Loading", note: "/health answers 503: loading, or its pipeline is broken" },
  down: { state: "dead", word: "Down", note: "/health refused the connection, or answered an error" },
  unknown: { state: "unknown", word: "Unknown", note: "health unknown: /health did not answer the last probe in time" },
};

/**
 * What the pid shown is: its process group's leader, a small shell that runs the engine and records
 * how it ends, which ignores TERM itself; a signal meant for the engine goes to the group.
 */
const groupHint = "the pid is its process group's leader, a shell that records how the engine ends: signal the group (kill -- -<pid>), not the pid";

function processText({ card, launching }: StageCardModel): string {
  if (card?.pid !== undefined) return `pid ${card.pid}${card.alive ? "" : card.liveness === "unknown" ? " (liveness unknown)" : " (gone)"}`;
  return launching?.pid === undefined ? "–" : `pid ${launching.pid}`;
}

function transportText({ card, launching }: StageCardModel): string {
  if (card !== undefined) return `${card.transport}${card.address === undefined ? "" : ` on ${card.address}`}`;
  if (launching?.listening === true) return `listening${launching.address === undefined ? "" : ` on ${launching.address}`}`;
  return "–";
}

function sinceText({ card, launching }: StageCardModel, now: number): string {
  const since = card?.since ?? launching?.startedAt;
  return since === undefined ? "–" : formatAge(since, now);
}

export function StageCards({ status, now }: { status: StatusView; now: number }) {
  const cards = stageCardsOf(status);
  if (cards.length === 0) return <p class="muted">No stages planned.</p>;
  const coordinator = status.coordinator;
  const death = deathOf(status);
  const coordinatorPart = death?.members.get("coordinator");
  const coordinatorDeath = coordinatorPart === undefined ? undefined : `${death!.reason}: ${coordinatorPart}`;
  // A launch under way that has started its coordinator: that, rather than the death before it.
  const launch = coordinator === undefined ? launchInPlaceOfCards(status) : undefined;
  const started = launch?.members.get("coordinator");
  const startedLook = started === undefined ? undefined : coordinatorLaunchLook(started, launch!.steps);
  return (
    <ul class="cards" aria-label="stage cards">
      {cards.map((c) => (
        <li class={`card state-${c.state}`} data-testid="stage-card" data-stage={c.index} data-state={c.state} key={c.index}>
          <div class="card-head">
            <strong>
              stage {c.index}
              {c.card?.rank === undefined ? "" : ` (rank ${c.card.rank})`}
            </strong>
            <span class={`pill state-${c.state}`}>{c.word ?? stateWords[c.state]}</span>
          </div>
          <dl class="facts">
            <dt>node</dt>
            <dd>{c.node}</dd>
            <dt>layers</dt>
            <dd>
              [{c.layers[0]}, {c.layers[1]})
            </dd>
            <dt title={groupHint}>process group</dt>
            <dd>{processText(c)}</dd>
            <dt>transport</dt>
            <dd>{transportText(c)}</dd>
            <dt>since</dt>
            <dd>{sinceText(c, now)}</dd>
          </dl>
          <p class="small muted">{c.note}</p>
        </li>
      ))}
      {started !== undefined && startedLook !== undefined ? (
        <li class={`card state-${startedLook.state}`} data-testid="coordinator-card" data-state={startedLook.state}>
          <div class="card-head">
            <strong>coordinator</strong>
            <span class={`pill state-${startedLook.state}`}>{startedLook.word}</span>
          </div>
          <dl class="facts">
            <dt title={groupHint}>process group</dt>
            <dd>{started.pid === undefined ? "–" : `pid ${started.pid}`}</dd>
          </dl>
          <p class="small muted">{startedLook.note}</p>
        </li>
      ) : null}
      {coordinator === undefined && started === undefined && coordinatorDeath !== undefined ? (
        // Nothing runs any more, but the death names the coordinator: say so where its card was.
        <li class="card state-dead" data-testid="coordinator-card" data-state="dead">
          <div class="card-head">
            <strong>coordinator</strong>
            <span class="pill state-dead">{stateWords.dead}</span>
          </div>
          <p class="small muted">{coordinatorDeath}</p>
        </li>
      ) : null}
      {coordinator === undefined ? null : (
        <li class={`card state-${coordinatorLook[coordinator.health].state}`} data-testid="coordinator-card" data-state={coordinatorLook[coordinator.health].state}>
          <div class="card-head">
            <strong>coordinator</strong>
            <span class={`pill state-${coordinatorLook[coordinator.health].state}`}>{coordinatorLook[coordinator.health].word}</span>
          </div>
          <dl class="facts">
            <dt>node</dt>
            <dd>{coordinator.node}</dd>
            <dt>endpoint</dt>
            <dd>
              <UrlText url={coordinator.url} />
            </dd>
            <dt title={groupHint}>process group</dt>
            <dd>{coordinator.pid === undefined ? "–" : `pid ${coordinator.pid}`}</dd>
          </dl>
          <p class="small muted">
            {coordinatorLook[coordinator.health].note}
            {coordinator.said === undefined ? "" : `: ${coordinator.said}`}
          </p>
        </li>
      )}
    </ul>
  );
}
