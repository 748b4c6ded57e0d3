/**
 * src/dashboard: the daemon's browser view (`[daemon] ui_address`): the page built into dist/ui,
 * JSON endpoints with the status schema's shapes, a Server-Sent Events stream of every status the
 * reconciler composes, and one action, "Reconcile now", behind a bearer token when one is set.
 */
export { startDashboard, type Dashboard, type DashboardOptions } from "./start-dashboard.js";
export { dashboardTokenOf, tokenMatches, bearerTokenOf } from "./token.js";
export { defaultAssetsDir } from "./assets.js";
export type { DashboardSource, PlanPreview, PlanStatus } from "./types.js";
