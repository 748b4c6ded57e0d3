/**
 * The page's live view of the daemon: one EventSource on api/events (no polling). The stream opens
 * with `hello` (whether a token is configured, when the daemon started, which clusters exist) and a
 * `status` per cluster, then carries every status the daemon composes and every cluster it forgets.
 * When the daemon goes away the browser retries every second (the server's `retry:`); the page says
 * the daemon is gone meanwhile, keeps the last statuses greyed out, and says so when a restarted
 * daemon answers again. A daemon that is stopped or hung keeps the connection open and sends
 * nothing: the daemon sends a `beat` every `heartbeatMs` (said in `hello`), and after four missed
 * beats the page calls it silent, greys the statuses the same way, and goes live again at its next
 * event. A stream cut without a word (a proxy or a NAT that dropped it, a laptop that slept while
 * the daemon gave up on it) looks the same and never speaks again, so a silent page also opens a
 * new stream, then again each time as long passes: a running daemon answers it, a stopped one does
 * not. A status the daemon only read from its file (written by an earlier daemon, before this one's
 * first pass of that cluster) is marked unchecked until the daemon's own status of it arrives; a
 * status file the daemon could not write is said beside the status (`statusFile` events). A tab out
 * of sight gives its stream back after 5 s (a browser opens at most six connections to one address)
 * and opens a new one when it is looked at again. Whether the browser says it is offline is kept
 * (shown beside a lost connection as a hint), and its return online opens a new stream at once.
 * A cluster the daemon forgot (its definition removed, its teardown done) is remembered as removed,
 * with when, until a status of that name comes again.
 */
import { parseShown } from "./parse-shown.js";
import type { HelloView, StatusFileView, StatusView } from "./status-types.js";

export type ConnectionState = "connecting" | "live" | "silent" | "gone";

export interface LiveState {
  connection: ConnectionState;
  /** When the connection last changed state (ms since the epoch). */
  since: number;
  /** Set when the daemon answering now started after the one the page first saw. */
  restartedAt?: string;
  tokenRequired: boolean;
  clusters: ReadonlyMap<string, StatusView>;
  /** Clusters whose status is still the file an earlier daemon wrote: not checked by the daemon that answers now. */
  unchecked: ReadonlySet<string>;
  /** Clusters whose status file the daemon could not write: the file others read is behind what is shown. */
  fileFailures: ReadonlyMap<string, NonNullable<StatusFileView["failure"]>>;
  /** Staging rate per cluster and node, bytes/s, from the last two progress updates. */
  rates: ReadonlyMap<string, ReadonlyMap<string, number>>;
  /** Whether the daemon has greeted this page once: before that, no cluster is known not to exist. */
  greeted: boolean;
  /** Clusters the last greeting named whose first status has not come yet. */
  awaiting: ReadonlySet<string>;
  /** The browser says it has no network (navigator.onLine false): a lost connection may be its own. A hint only: a machine without a network says so while its loopback works. */
  offline: boolean;
  /** Clusters the daemon forgot while this page watched (their definition removed, their teardown done), with when (ms since the epoch). */
  removed: ReadonlyMap<string, number>;
}

/** Re-create the EventSource when the browser gave up on it (a non-stream answer), ms. */
const reopenDelayMs = 2000;
/**
 * Beats missed before a connected daemon is silent, and the least silence that counts, ms: the rule
 * `shardctl status` applies to the daemon's lock.
 */
const missedBeats = 4;
const minSilenceMs = 3000;
/** How long a tab out of sight keeps its stream before it gives the connection back, ms. */
const hiddenReleaseMs = 5000;

export function connectLive(onChange: (state: LiveState) => void): () => void {
  let state: LiveState = {
    connection: "connecting",
    since: Date.now(),
    tokenRequired: false,
    clusters: new Map(),
    unchecked: new Set(),
    fileFailures: new Map(),
    rates: new Map(),
    greeted: false,
    awaiting: new Set(),
    offline: navigator.onLine === false,
    removed: new Map(),
  };
  let firstStart: string | undefined;
  let source: EventSource | undefined;
  let reopen: number | undefined;
  /** When the stream last carried anything, and how often the daemon promised to beat (ms). */
  let heardAt = Date.now();
  let heartbeatMs: number | undefined;
  /** When the current stream was opened, ms since the epoch. */
  let openedAt = Date.now();
  const samples = new Map<string, { at: number; done: number }>();
  /** Whether this tab, out of sight, gave its stream back; the timer that will, once it is hidden. */
  let released = false;
  let hiddenTimer: number | undefined;
  /**
   * Clusters named in the last `hello` whose first status has not come yet: that status is the one
   * the daemon read for the hello (from its file when unchecked), not a newly composed one.
   */
  let greeting = new Set<string>();
  const update = (next: Partial<LiveState>): void => {
    state = { ...state, ...next };
    onChange(state);
  };

  /** Anything from the daemon: it runs. */
  const heard = (): void => {
    heardAt = Date.now();
    if (state.connection === "silent") update({ connection: "live", since: heardAt });
  };

  const open = (): void => {
    openedAt = Date.now();
    source = new EventSource("api/events");
    source.addEventListener("beat", heard);
    source.addEventListener("hello", (event) => {
      const hello = parseShown<HelloView>((event as MessageEvent<string>).data);
      heardAt = Date.now();
      heartbeatMs = hello.heartbeatMs;
      firstStart ??= hello.startedAt;
      greeting = new Set(hello.clusters);
      // An unchecked cluster without a status (its file did not read) keeps the one the page had, marked.
      const kept = new Set([...hello.clusters, ...(hello.unchecked ?? [])]);
      const clusters = new Map([...state.clusters].filter(([name]) => kept.has(name)));
      update({
        connection: "live",
        since: Date.now(),
        tokenRequired: hello.tokenRequired,
        clusters,
        unchecked: new Set(hello.unchecked ?? []),
        greeted: true,
        awaiting: new Set(hello.clusters),
        // The daemon says again which files it could not write, after the statuses.
        fileFailures: new Map(),
        ...(hello.startedAt !== firstStart ? { restartedAt: hello.startedAt } : {}),
      });
    });
    source.addEventListener("status", (event) => {
      heard();
      const status = parseShown<StatusView>((event as MessageEvent<string>).data);
      const clusters = new Map(state.clusters);
      clusters.set(status.cluster, status);
      // The status sent with the hello leaves the mark; any later one is the daemon's own.
      const unchecked = greeting.delete(status.cluster) ? state.unchecked : without(state.unchecked, status.cluster);
      const removed = state.removed.has(status.cluster) ? new Map([...state.removed].filter(([name]) => name !== status.cluster)) : state.removed;
      update({
        clusters,
        unchecked,
        rates: new Map(state.rates).set(status.cluster, ratesOf(status)),
        awaiting: without(state.awaiting, status.cluster),
        removed,
      });
    });
    source.addEventListener("statusFile", (event) => {
      heard();
      const { cluster, failure } = parseShown<StatusFileView>((event as MessageEvent<string>).data);
      const fileFailures = new Map(state.fileFailures);
      if (failure === null) fileFailures.delete(cluster);
      else fileFailures.set(cluster, failure);
      update({ fileFailures });
    });
    source.addEventListener("removed", (event) => {
      heard();
      const { cluster } = parseShown<{ cluster: string }>((event as MessageEvent<string>).data);
      const clusters = new Map(state.clusters);
      clusters.delete(cluster);
      const fileFailures = new Map(state.fileFailures);
      fileFailures.delete(cluster);
      update({
        clusters,
        unchecked: without(state.unchecked, cluster),
        fileFailures,
        awaiting: without(state.awaiting, cluster),
        removed: new Map(state.removed).set(cluster, Date.now()),
      });
    });
    source.onerror = () => {
      if (state.connection !== "gone") update({ connection: "gone", since: Date.now() });
      if (source?.readyState === EventSource.CLOSED) {
        source.close();
        reopen = window.setTimeout(open, reopenDelayMs);
      }
    };
  };

  /** bytes/s per node since the previous update of that node's staging. */
  const ratesOf = (status: StatusView): Map<string, number> => {
    const rates = new Map<string, number>();
    const now = Date.now();
    for (const s of status.staging) {
      const key = `${status.cluster}/${s.node}`;
      const previous = samples.get(key);
      if (previous !== undefined && s.bytesDone > previous.done && now > previous.at) rates.set(s.node, ((s.bytesDone - previous.done) * 1000) / (now - previous.at));
      if (previous?.done !== s.bytesDone) samples.set(key, { at: now, done: s.bytesDone });
    }
    return rates;
  };

  /** `names` without `name` (the same set when it was not there: nothing to re-render for). */
  const without = (names: ReadonlySet<string>, name: string): ReadonlySet<string> => {
    if (!names.has(name)) return names;
    const rest = new Set(names);
    rest.delete(name);
    return rest;
  };

  /** Leave the stream that says nothing for a new one; the state stays what it is until the new one speaks. */
  const reopenNow = (): void => {
    window.clearTimeout(reopen);
    source?.close();
    open();
  };

  // Silence: a live connection over which four beats have not come. Checked every second.
  const listen = window.setInterval(() => {
    // A tab that gave its stream back hears nothing by design.
    if (heartbeatMs === undefined || released) return;
    const silenceMs = Math.max(missedBeats * heartbeatMs, minSilenceMs);
    if (state.connection === "live" && Date.now() - heardAt > silenceMs) {
      update({ connection: "silent", since: heardAt });
      reopenNow();
    } else if (state.connection === "silent" && Date.now() - openedAt > silenceMs) {
      // The new stream has not spoken either: the daemon is stopped or hung (or that stream was cut too).
      reopenNow();
    }
  }, 1000);

  // A tab out of sight gives its stream back after a while: a browser opens at most six
  // connections to one address, so six open tabs of the dashboard would leave a seventh (and any
  // request of theirs) waiting for ever. Back in sight it opens a new stream, whose hello and
  // statuses bring the page up to date.
  const onVisibility = (): void => {
    window.clearTimeout(hiddenTimer);
    if (document.visibilityState === "hidden") {
      hiddenTimer = window.setTimeout(() => {
        released = true;
        window.clearTimeout(reopen);
        source?.close();
        source = undefined;
      }, hiddenReleaseMs);
    } else if (released) {
      released = false;
      update({ connection: "connecting", since: Date.now() });
      open();
    }
  };
  document.addEventListener("visibilitychange", onVisibility);

  // The browser's own network: offline, the page says so; back online, a new stream at once rather
  // than at the browser's next retry (a stream cut meanwhile may never say it was).
  const onOffline = (): void => update({ offline: true });
  const onOnline = (): void => {
    update({ offline: false });
    if (!released) reopenNow();
  };
  window.addEventListener("offline", onOffline);
  window.addEventListener("online", onOnline);

  open();
  return () => {
    window.clearTimeout(reopen);
    window.clearTimeout(hiddenTimer);
    window.clearInterval(listen);
    document.removeEventListener("visibilitychange", onVisibility);
    window.removeEventListener("offline", onOffline);
    window.removeEventListener("online", onOnline);
    source?.close();
  };
}
