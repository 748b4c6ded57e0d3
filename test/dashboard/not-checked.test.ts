/**
 * `GET /api/clusters/<name>` tells a script a cluster it just committed (defined, no status yet:
 * wait) from a name that does not exist (stop): two reasons, where there was one for both.
 */
import { afterAll, beforeAll, expect, test } from "vitest";
import type { Dashboard } from "../../src/dashboard/index.js";
import { StatusFeed } from "../../src/reconciler/index.js";
import { startFeedDashboard } from "./support.js";

let dashboard: Dashboard;
beforeAll(async () => {
  dashboard = await startFeedDashboard(new StatusFeed(), "fresh");
});
afterAll(async () => {
  await dashboard?.close();
});

test("defined without a status: DashboardClusterNotChecked; no such cluster: DashboardClusterNotFound; a path that is no name is never looked for", async () => {
  const ask = async (name: string): Promise<{ status: number; reason: string }> => {
    const response = await fetch(new URL(`api/clusters/${name}`, dashboard.url));
    return { status: response.status, reason: ((await response.json()) as { error: { reason: string } }).error.reason };
  };
  expect(await ask("fresh")).toEqual({ status: 404, reason: "DashboardClusterNotChecked" });
  expect(await ask("nope")).toEqual({ status: 404, reason: "DashboardClusterNotFound" });
  expect(await ask("..%2Ffresh")).toEqual({ status: 404, reason: "DashboardClusterNotFound" });
});
