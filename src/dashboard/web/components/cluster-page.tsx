/** One cluster: what the daemon knows of it, section by section, live. */
import { commitsOf } from "../commits.js";
import { conditionTone, isConcern } from "../condition-tone.js";
import { formatAge, formatBytes, formatClock, formatDuration, short } from "../format.js";
import { stageCountOf } from "../stage-count.js";
import type { ConditionView, StatusFileView, StatusView } from "../status-types.js";
import { ClusterBadge, HealthBadge } from "./badges.js";
import { LayerBar, MemoryFit, PlanWarnings } from "./plan.js";
import { ScrollBox } from "./scroll-box.js";
import { StageCards } from "./stage-cards.js";
import { Timeline } from "./timeline.js";

export interface ClusterPageProps {
  status: StatusView | undefined;
  name: string;
  now: number;
  rates: ReadonlyMap<string, number> | undefined;
  stale: boolean;
  /** The status is the file an earlier daemon wrote: the daemon that runs now has not checked the cluster yet. */
  unchecked: boolean;
  /** The daemon could not write this cluster's status file: what `shardctl status` and CI read is older. */
  fileFailure: StatusFileFailureView | undefined;
  onReconcile: (name: string) => void;
  reconcileNote: string | undefined;
  reconciling: boolean;
  /** The daemon has not said yet whether it knows the cluster (not greeted yet, or its status is on its way). */
  loading: boolean;
  /** When the daemon forgot the cluster while the page watched (its definition removed, its teardown done), ms since the epoch. */
  removedAt?: number | undefined;
}

type StatusFileFailureView = NonNullable<StatusFileView["failure"]>;

/**
 * Ready's three answers in words and tone. Unknown is not "Not ready": a restarted daemon that found
 * the cluster running has not seen it serve yet (it may well serve), and it is not Ready either.
 */
const readyLook: Record<ConditionView["status"], { words: string; tone: string }> = {
  True: { words: "Ready", tone: "good" },
  False: { words: "Not ready", tone: "bad" },
  Unknown: { words: "Ready unknown", tone: "warn" },
};

export function ClusterPage({ status, name, now, rates, stale, unchecked, fileFailure, onReconcile, reconcileNote, reconciling, loading, removedAt }: ClusterPageProps) {
  if (status === undefined) {
    return (
      <section>
        <h1>{name}</h1>
        <p class="muted" data-testid="no-status">
          {loading
            ? `Waiting for the daemon to send the status of “${name}”…`
            : unchecked
              ? `The daemon cannot read the status file of “${name}” and has not checked it yet: its first pass of ${name} writes a new one.`
              : removedAt !== undefined
                ? `“${name}” was removed at ${formatClock(removedAt)}: its definition is gone, and the daemon stopped what of it ran and removed its status file.`
                : `The daemon has no status of a cluster named “${name}”.`}{" "}
          <a href="#/">All clusters</a>
        </p>
      </section>
    );
  }
  const ready = status.conditions.find((c) => c.type === "Ready");
  const staged = status.conditions.find((c) => c.type === "Staged");
  return (
    <>
      {unchecked ? <UncheckedNote status={status} /> : null}
      {fileFailure === undefined ? null : <FileFailureNote status={status} failure={fileFailure} />}
      <ClusterArticle {...{ status, now, rates, stale, unchecked, onReconcile, reconcileNote, reconciling, ready, staged }} />
    </>
  );
}

/**
 * Said above a status the daemon that runs now has not composed: a restarted daemon serves the
 * files its predecessor wrote until its first pass of each cluster (seconds when its queue is
 * busy), and a Ready or a Healthy there is what held then. Not greyed itself, so it reads first.
 */
function UncheckedNote({ status }: { status: StatusView }) {
  const lastPass = status.history.at(-1)?.at;
  return (
    <p class="unchecked-note" role="status" data-testid="unchecked">
      Not checked yet by the daemon that runs now: below is the status an earlier daemon wrote
      {lastPass === undefined ? "" : ` (its last pass at ${formatClock(lastPass)})`}, which may no longer hold. It is replaced at this daemon&apos;s first pass of{" "}
      {status.cluster}.
    </p>
  );
}

/**
 * Said above a status the daemon could not write to its file: the page shows the daemon's latest
 * word, and without this it would silently disagree with `shardctl status` and whatever reads the
 * file (CI), which still see an older one.
 */
function FileFailureNote({ status, failure }: { status: StatusView; failure: StatusFileFailureView }) {
  return (
    <p class="unchecked-note" role="alert" data-testid="file-failure">
      The daemon could not write {status.file}&apos;s status at {formatClock(failure.at)}: <code>{failure.reason}</code> {failure.message}. What{" "}
      <code>shardctl status</code> and anything reading the file see is older than this page.
    </p>
  );
}

interface ClusterArticleProps {
  status: StatusView;
  now: number;
  rates: ReadonlyMap<string, number> | undefined;
  /** The daemon is gone or silent: greyed, and nothing to ask it. */
  stale: boolean;
  /** Greyed too, but the daemon answers: "Reconcile now" asks for the pass that checks it. */
  unchecked: boolean;
  onReconcile: (name: string) => void;
  reconcileNote: string | undefined;
  reconciling: boolean;
  ready: ConditionView | undefined;
  staged: ConditionView | undefined;
}

function ClusterArticle({ status, now, rates, stale, unchecked, onReconcile, reconcileNote, reconciling, ready, staged }: ClusterArticleProps) {
  return (
    <article class={stale || unchecked ? "stale" : undefined} aria-labelledby="cluster-title">
      <header class="page-head">
        <div>
          <h1 id="cluster-title">
            {status.cluster} <ClusterBadge stages={stageCountOf(status)} /> <HealthBadge health={status.health} />
          </h1>
          <p class="muted" data-testid="cluster-facts">
            {status.model ?? "no model"} · revision <code>{short(status.observedRevision)}</code>
            {commitsOf(status).map((c) => (
              <span key={c.label} title={c.title}>
                {" "}
                · {c.label} <code>{short(c.commit)}</code>
              </span>
            ))}{" "}
            · {status.file}
            {status.definitionRemoved === true ? ` (removed: ${removalInWords(status)})` : ""} · desired {status.desired}
          </p>
          {ready === undefined ? null : (
            // A live region: a reader is told when readiness changes, not only when it looks.
            <p class={`ready-line ${readyLook[ready.status].tone}`} data-status={ready.status} data-testid="ready-line" role="status" aria-live="polite">
              {readyLook[ready.status].words}: <code>{ready.reason}</code> {ready.message}
            </p>
          )}
          <Why status={status} />
        </div>
        <div class="actions">
          {/* aria-disabled, not disabled: a disabled button drops the keyboard's focus to the page
              while the request is asked, and says nothing of why it cannot be pressed. */}
          <button
            type="button"
            onClick={() => (reconciling || stale ? undefined : onReconcile(status.cluster))}
            aria-disabled={reconciling || stale ? "true" : "false"}
            title={stale ? "the daemon is not live: nothing can be asked of it until it is" : reconciling ? "asking the daemon" : undefined}
            data-testid="reconcile"
          >
            {reconciling ? "Asking…" : "Reconcile now"}
          </button>
          <p class="small muted" role="status" aria-live="polite" data-testid="reconcile-note">
            {reconcileNote ?? ""}
          </p>
        </div>
      </header>

      <section aria-labelledby="h-stages">
        <h2 id="h-stages">Stages</h2>
        <StageCards status={status} now={now} />
      </section>

      <section aria-labelledby="h-plan">
        <h2 id="h-plan">Shard plan</h2>
        {status.plan === undefined ? (
          <p class="muted">Not planned yet.</p>
        ) : (
          <>
            <p class="small muted">
              {status.plan.strategy} split · {status.plan.feasible ? "feasible" : "infeasible"}
            </p>
            <LayerBar plan={status.plan} />
            <h3>Memory fit per node</h3>
            <MemoryFit plan={status.plan} />
            <PlanWarnings plan={status.plan} />
          </>
        )}
      </section>

      <section aria-labelledby="h-staging">
        <h2 id="h-staging">Staging</h2>
        {status.staging.length === 0 ? (
          // A model verified where it lies (source "path") is staged without a byte copied.
          <p class="muted">{staged?.status === "True" ? `Nothing to copy: ${staged.message}.` : "Nothing staged yet."}</p>
        ) : (
          <ul class="staging">
            {status.staging.map((s) => {
              const rate = rates?.get(s.node);
              return (
                <li key={s.node} data-testid="staging-row" data-state={s.state}>
                  <label>
                    <span>
                      <strong>{s.node}</strong> <span class="staging-state">{s.state}</span> ·{" "}
                      {/* A node that already held every file transferred nothing: "0 B of 0 B" read as an empty model. */}
                      {s.state === "present" && s.bytesTotal === 0 ? "nothing to transfer" : `${formatBytes(s.bytesDone)} of ${formatBytes(s.bytesTotal)}`}
                      {rate === undefined || s.state !== "staging" ? "" : ` · ${formatBytes(rate)}/s`}
                    </span>
                    <progress max={Math.max(1, s.bytesTotal)} value={s.state === "present" ? Math.max(1, s.bytesTotal) : s.bytesDone} />
                  </label>
                  {/* Why it failed, or what a staging waits for (another process's lock on the node). */}
                  {(s.state === "failed" || s.state === "staging") && s.reason !== undefined && (
                    <p class="staging-why" data-testid="staging-why">
                      <strong>{s.reason}</strong> {s.message}
                    </p>
                  )}
                </li>
              );
            })}
          </ul>
        )}
      </section>

      <section aria-labelledby="h-timeline">
        <h2 id="h-timeline">Launch timeline</h2>
        <Timeline events={status.timeline} />
      </section>

      <section aria-labelledby="h-conditions">
        <h2 id="h-conditions">Conditions</h2>
        <ScrollBox label="Conditions table">
          <table>
            <thead>
              <tr>
                <th scope="col">type</th>
                <th scope="col">status</th>
                <th scope="col">reason</th>
                <th scope="col">message</th>
                <th scope="col">revision</th>
                <th scope="col">since</th>
              </tr>
            </thead>
            <tbody>
              {status.conditions.map((c) => (
                <tr key={c.type}>
                  <th scope="row">{c.type}</th>
                  <td class={`cond cond-${conditionTone(c)}`}>{c.status}</td>
                  <td>
                    <code>{c.reason}</code>
                  </td>
                  <td class="message">{c.message}</td>
                  <td>
                    <code>{short(c.observedRevision)}</code>
                  </td>
                  <td>{formatAge(c.lastTransitionTime, now)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </ScrollBox>
      </section>

      <section aria-labelledby="h-restarts">
        <h2 id="h-restarts">Restarts</h2>
        {status.restarts === undefined ? (
          <p class="muted">No launch at this revision yet.</p>
        ) : (
          <>
            <p>
              {status.restarts.count} of {status.restarts.budget} launches used at revision <code>{short(status.restarts.revision)}</code>
            </p>
            {status.restarts.evidence.length === 0 ? null : (
              <ol class="evidence">
                {status.restarts.evidence.map((e) => (
                  <li key={e.at + e.reason}>
                    <time dateTime={e.at}>{formatClock(e.at)}</time> <code>{e.reason}</code> {e.message}
                    {e.logTail.length === 0 ? null : (
                      <details>
                        <summary>last {e.logTail.length} log lines</summary>
                        <pre>{e.logTail.join("\n")}</pre>
                      </details>
                    )}
                  </li>
                ))}
              </ol>
            )}
          </>
        )}
        {status.lastError === undefined ? null : (
          <p class="error-line">
            Last error at {formatClock(status.lastError.at)}: <code>{status.lastError.reason}</code> {status.lastError.message}
          </p>
        )}
      </section>

      <section aria-labelledby="h-passes">
        <h2 id="h-passes">Last passes</h2>
        <ScrollBox label="Last passes table">
          <table>
            <thead>
              <tr>
                <th scope="col">at</th>
                <th scope="col">action</th>
                <th scope="col">result</th>
                <th scope="col">reason</th>
                <th scope="col">took</th>
              </tr>
            </thead>
            <tbody>
              {[...status.history].reverse().map((p) => (
                <tr key={p.at + p.action}>
                  <td>
                    <time dateTime={p.at}>{formatClock(p.at)}</time>
                  </td>
                  <td>{p.action}</td>
                  <td>{p.result}</td>
                  <td>{p.reason === undefined ? "–" : <code>{p.reason}</code>}</td>
                  <td>{formatDuration(p.durationMs)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </ScrollBox>
      </section>
    </article>
  );
}

/** Longest message the why list repeats after the Ready line has said it, characters (a line or two). */
const repeatedMessageMax = 160;

/**
 * Whether a concern's message is a long one the Ready line, just above, already says: an invalid
 * definition's Stalled and Planned carry its issues too, up to a thousand characters each, and
 * repeating them pushed the page's facts and "Reconcile now" screens down. A short one reads better
 * repeated beside its condition. Each stays whole in the conditions table below.
 */
function saysReady(concern: ConditionView, ready: ConditionView | undefined): boolean {
  return ready !== undefined && concern.message.length > repeatedMessageMax && ready.message.includes(concern.message);
}

/**
 * Why a cluster is not Healthy, at the top of its page: the conditions other than Ready that are not
 * in their quiet state (Unknown, a False that is a fault, Stalled True), and a Ready that holds only
 * for an earlier revision. Without it a Degraded cluster that still serves showed a green "Ready"
 * and two healthy cards, its reason only in the conditions table further down.
 */
function Why({ status }: { status: StatusView }) {
  if (status.health === "Healthy") return null;
  const ready = status.conditions.find((c) => c.type === "Ready");
  const concerns = status.conditions.filter(isConcern);
  const olderReady = ready?.status === "True" && ready.observedRevision !== status.observedRevision && status.observedRevision !== "";
  if (concerns.length === 0 && !olderReady) return null;
  return (
    <ul class="why" aria-label={`Why ${status.health}`} data-testid="why">
      {olderReady ? (
        <li>
          Ready holds for revision <code>{short(ready.observedRevision)}</code>, which still serves, not for <code>{short(status.observedRevision)}</code>
        </li>
      ) : null}
      {concerns.map((c) => (
        <li key={c.type}>
          <strong>{c.type}</strong> <span class={`cond cond-${conditionTone(c)}`}>{c.status}</span>: <code>{c.reason}</code>{" "}
          {saysReady(c, ready) ? <span class="muted">(the message Ready says above)</span> : c.message}
        </li>
      ))}
    </ul>
  );
}

/** What becomes of a cluster whose definition is gone, as its status says: torn down, or why not. */
function removalInWords(status: StatusView): string {
  const stalled = status.conditions.find((c) => c.type === "Stalled" && c.status === "True");
  if (stalled?.reason === "MassPruneRefused") return "the daemon refuses to tear every cluster down at once; it keeps running";
  if (stalled?.reason === "DefinitionsDirMissing") return "the definitions folder is missing; the daemon tears nothing down until it is back";
  return "the daemon tears the cluster down";
}
