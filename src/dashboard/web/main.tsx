/**
 * The shardctl dashboard: what the daemon sees, live. Routes live in the URL's hash (#/, #/clusters/
 * <name>, #/plan) so the daemon serves one page; state comes only from the event stream (live.ts).
 */
import { render } from "preact";
import { useCallback, useEffect, useRef, useState } from "preact/hooks";
import { previewPlan, requestReconcile, tokenNotSendable, type Answer } from "./api.js";
import { ClusterPage } from "./components/cluster-page.js";
import { ClustersList } from "./components/clusters-list.js";
import { PlanPreviewPage } from "./components/plan-preview.js";
import { TokenDialog } from "./components/token-dialog.js";
import { formatClock, formatDuration } from "./format.js";
import { connectLive, type LiveState } from "./live.js";
import type { Health, PlanPreviewView } from "./status-types.js";
import "./styles.css";

type Route = { page: "clusters" } | { page: "cluster"; name: string } | { page: "plan" };

function routeOf(hash: string): Route {
  const cluster = /^#\/clusters\/(.+)$/.exec(hash);
  if (cluster !== null) return { page: "cluster", name: decodeSegment(cluster[1]!) };
  if (hash === "#/plan") return { page: "plan" };
  return { page: "clusters" };
}

/**
 * A cluster name from the hash, as written when its percent-encoding is broken: a pasted or cut
 * link ("#/clusters/%E0%A4") threw URIError on the page's first render and left it blank.
 */
function decodeSegment(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}

/**
 * The stream opens as soon as this script runs, not after the first render: effects run only after
 * a frame is painted, which would delay the first statuses by a frame or more.
 */
let latest: LiveState | undefined;
const listeners = new Set<(state: LiveState) => void>();
connectLive((state) => {
  latest = state;
  for (const listener of listeners) listener(state);
});

/** Re-render ages every second: a clock, not a poll (nothing is fetched). */
const clockMs = 1000;

function App() {
  const [live, setLive] = useState<LiveState | undefined>(latest);
  const [route, setRoute] = useState<Route>(routeOf(location.hash));
  const [now, setNow] = useState(Date.now());
  const [filter, setFilter] = useState<Health | "all">("all");
  const [token, setToken] = useState<string | undefined>(undefined);
  // The token dialog: what to run with the token given, and what to answer when the person cancels.
  const [asking, setAsking] = useState<{ problem?: string; run: (token: string) => void; cancel: () => void } | undefined>(undefined);
  const [reconcile, setReconcile] = useState<{ name: string; busy: boolean; note?: string } | undefined>(undefined);

  useEffect(() => {
    if (latest !== undefined) setLive(latest);
    listeners.add(setLive);
    return () => void listeners.delete(setLive);
  }, []);
  useEffect(() => {
    const onHash = (): void => setRoute(routeOf(location.hash));
    window.addEventListener("hashchange", onHash);
    const timer = window.setInterval(() => setNow(Date.now()), clockMs);
    return () => {
      window.removeEventListener("hashchange", onHash);
      window.clearInterval(timer);
    };
  }, []);
  // A new page puts the focus on its content, as a page load would put it at the top; the first
  // page leaves it where the browser puts it, so the first Tab reaches "Skip to content" and the nav.
  // The page opens at its top, as a load does: focusing would scroll the content's start under the
  // sticky header, hiding the page's title and health.
  const routed = useRef(false);
  useEffect(() => {
    if (routed.current) {
      document.getElementById("main")?.focus({ preventScroll: true });
      window.scrollTo(0, 0);
    }
    routed.current = true;
  }, [route]);
  // The tab says when what it shows is no longer current: a person with several tabs open sees it
  // without switching to this one.
  const connection = live?.connection;
  useEffect(() => {
    const page = route.page === "cluster" ? route.name : route.page === "plan" ? "plan preview" : "clusters";
    const prefix = connection === "silent" ? "(daemon silent) " : connection === "gone" ? "(daemon gone) " : "";
    document.title = `${prefix}${page} · shardctl`;
  }, [route, connection]);

  /** Run `action` with the token when the daemon wants one: ask for it first, and again when refused. */
  const withToken = useCallback(
    <T,>(action: (token: string | undefined) => Promise<Answer<T>>, done: (answer: Answer<T>) => void): void => {
      // Cancelling the dialog ends the action too, so nothing waits for a token that never comes.
      const cancel = (): void => done({ ok: false, status: 401, reason: "Cancelled", message: "no token given" });
      const attempt = (candidate: string | undefined): void => {
        void action(candidate).then((answer) => {
          if (!answer.ok && answer.status === 401) {
            setToken(undefined);
            const problem = answer.reason === tokenNotSendable ? `That token cannot be sent: ${answer.message}.` : "The daemon refused that token.";
            setAsking({ problem: candidate === undefined ? undefined : problem, run: attempt, cancel });
            return;
          }
          if (candidate !== undefined) setToken(candidate);
          done(answer);
        });
      };
      if (live?.tokenRequired === true && token === undefined) setAsking({ run: attempt, cancel });
      else attempt(token);
    },
    [live?.tokenRequired, token],
  );

  const onReconcile = (name: string): void => {
    setReconcile({ name, busy: true });
    withToken(
      (t) => requestReconcile(name, t),
      (answer) =>
        setReconcile({
          name,
          busy: false,
          note: answer.ok
            ? `The daemon took the request at ${formatClock(Date.now())}: a pass now, with a fresh restart budget.`
            : answer.reason === "Cancelled"
              ? "Cancelled: no token given."
              : `Refused: ${answer.reason}: ${answer.message}`,
        }),
    );
  };

  const onPreview = (toml: string, name: string, probe: boolean): Promise<{ preview?: PlanPreviewView; problem?: string }> =>
    new Promise((resolve) =>
      withToken(
        (t) => previewPlan(toml, name, probe, t),
        (answer) => resolve(answer.ok ? { preview: answer.body } : { problem: `${answer.reason}: ${answer.message}` }),
      ),
    );

  const clusters = [...(live?.clusters.values() ?? [])].sort((a, b) => a.cluster.localeCompare(b.cluster));
  // Neither a gone nor a silent daemon keeps what the page shows current.
  const stale = live?.connection === "gone" || live?.connection === "silent";
  return (
    <>
      <a class="skip" href="#main" onClick={(e) => (e.preventDefault(), document.getElementById("main")?.focus())}>
        Skip to content
      </a>
      <header class="top">
        <nav aria-label="dashboard">
          <a class="brand" href="#/">
            shardctl
          </a>
          <a href="#/" aria-current={route.page !== "plan" ? "page" : undefined}>
            Clusters
          </a>
          <a href="#/plan" aria-current={route.page === "plan" ? "page" : undefined}>
            Plan preview
          </a>
        </nav>
        <Connection live={live} now={now} />
      </header>
      <main id="main" tabIndex={-1}>
        {route.page === "clusters" ? (
          <ClustersList
            clusters={clusters}
            unchecked={live?.unchecked ?? new Set()}
            fileFailures={live?.fileFailures ?? new Map()}
            filter={filter}
            onFilter={setFilter}
            now={now}
            stale={stale}
          />
        ) : null}
        {route.page === "cluster" ? (
          <ClusterPage
            name={route.name}
            status={live?.clusters.get(route.name)}
            now={now}
            rates={live?.rates.get(route.name)}
            stale={stale}
            unchecked={live?.unchecked.has(route.name) === true}
            fileFailure={live?.fileFailures.get(route.name)}
            onReconcile={onReconcile}
            reconciling={reconcile?.name === route.name && reconcile.busy}
            reconcileNote={reconcile?.name === route.name ? reconcile.note : undefined}
            loading={live?.greeted !== true || live.awaiting.has(route.name)}
            removedAt={live?.removed.get(route.name)}
          />
        ) : null}
        {route.page === "plan" ? <PlanPreviewPage onPreview={onPreview} /> : null}
      </main>
      <TokenDialog
        open={asking !== undefined}
        problem={asking?.problem}
        onSubmit={(value) => {
          const run = asking?.run;
          setAsking(undefined);
          run?.(value);
        }}
        onCancel={() => {
          const cancel = asking?.cancel;
          setAsking(undefined);
          cancel?.();
        }}
      />
    </>
  );
}

/**
 * Whether the page is live: connecting, live (and whether the daemon restarted), or the daemon is
 * silent or gone, since when and how long ago. A browser that says it is offline is said to, beside
 * that, not instead: the browser's word is a hint only (a machine without a network, or one in a
 * namespace of its own, says offline while the daemon on its loopback answers).
 */
function Connection({ live, now }: { live: LiveState | undefined; now: number }) {
  const state = live?.connection ?? "connecting";
  const since = live?.since ?? now;
  // The clock time, and how long ago (in whole seconds under a minute: the page re-renders once a second).
  const ago = now - since < 60_000 ? `${Math.max(1, Math.round((now - since) / 1000))} s` : formatDuration(now - since);
  const sinceText = `${formatClock(since)}, ${ago} ago`;
  const offline = live?.offline === true && state !== "live" ? " This browser says it is offline: its own network may be the cause." : "";
  const text =
    state === "live"
      ? live?.restartedAt === undefined
        ? "Live"
        : `Live — the daemon restarted at ${formatClock(live.restartedAt)}`
      : state === "gone"
        ? `The daemon is gone since ${sinceText}: showing its last word, reconnecting…${offline}`
        : state === "silent"
          ? `The daemon has been silent since ${sinceText} (stopped or hung?): showing its last word, which may no longer hold.${offline}`
          : `Connecting to the daemon…${offline}`;
  return (
    <p
      class={`connection conn-${state}`}
      role={state === "gone" || state === "silent" ? "alert" : "status"}
      aria-live="polite"
      data-testid="connection"
      data-state={state}
    >
      <span class="dot" aria-hidden="true" /> {text}
    </p>
  );
}

const root = document.getElementById("app")!;
// The "Loading…" line is for the moment before this script runs; render() would keep it.
root.textContent = "";
render(<App />, root);
