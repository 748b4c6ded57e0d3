/** Reasons of the daemon's dashboard: its listener and its JSON endpoints (src/dashboard). */
export type DashboardReason =
  /** `[daemon] ui_address` is not a loopback address and no token is configured or set (terminal: the daemon refuses to start). */
  | "DashboardTokenMissing"
  /** The dashboard cannot listen on `[daemon] ui_address` (terminal: the daemon refuses to start). */
  | "DashboardListenFailed"
  /** The page's assets are not built (`npm run build` builds them); the JSON endpoints still serve. */
  | "DashboardAssetsMissing"
  /** A request to an endpoint is malformed: a body too large, a cluster name that is not one. */
  | "DashboardBadRequest"
  /** No cluster of that name: no definition in the watched directory, nor a status. */
  | "DashboardClusterNotFound"
  /** A cluster defined in the watched directory that has no status yet: the daemon has not looked at it. */
  | "DashboardClusterNotChecked"
  /** No endpoint or file at that path. */
  | "DashboardNotFound"
  /** The endpoint or file exists but not with that method; the reply's `Allow` header lists those it takes. */
  | "DashboardMethodNotAllowed"
  /** A request from another origin, or to a host name the dashboard does not serve (DNS rebinding). */
  | "DashboardForbidden"
  /** As many event streams are open as the dashboard serves at once (256 by default); the page retries. */
  | "DashboardBusy"
  /** A request lacks the bearer token, or carries another one. */
  | "DashboardUnauthorized"
  /** The daemon did not take a reconcile request within its deadline (transient). */
  | "ReconcileRequestTimeout"
  /** The daemon is stopping: its page still shows what it does, but it takes no request (no pass, no plan). */
  | "DashboardDaemonStopping";
