/**
 * A daemon whose dashboard cannot listen (its address taken) fails to start with nothing left
 * half-running: no pass ran (no status file appears), and its lock is given back, so a daemon
 * started once the address is free runs.
 */
import { createServer, type AddressInfo } from "node:net";
import { expect, it } from "vitest";
import { isShardctlError } from "../../src/errors/index.js";
import { enableDashboard } from "../dashboard/support.js";
import { allocateHost } from "../support/test-world.js";
import { definitionText, readStatusFile, sleep, startInProcessDaemon, waitForStatus, writeDefinition } from "./daemon-fixture.js";
import { useDaemonWorld } from "./use-daemon-world.js";

// The test starts its daemons itself: the first start is the one that must fail.
const dw = useDaemonWorld({ daemon: "none" });

it("a taken dashboard address: start fails with DashboardListenFailed, no pass runs, the lock is given back", async () => {
  const { world } = dw;
  const host = await allocateHost();
  const holder = createServer();
  await new Promise<void>((resolve) => holder.listen(0, host, resolve));
  const { port } = holder.address() as AddressInfo;
  await enableDashboard(world, { address: `${host}:${port}` });
  await writeDefinition(world, "alpha", definitionText(world, { nodes: ["l1", "l2"] }));

  const failure = await startInProcessDaemon(world).then(
    () => undefined,
    (error: unknown) => error,
  );
  expect(isShardctlError(failure, "DashboardListenFailed"), String(failure)).toBe(true);
  // Passes would have planned alpha and written its status within milliseconds.
  await sleep(1_000);
  expect(await readStatusFile(world, "alpha")).toBeUndefined();

  await new Promise<void>((resolve) => holder.close(() => resolve()));
  const daemon = await startInProcessDaemon(world);
  try {
    expect(daemon.uiUrl).toBe(`http://${host}:${port}/`);
    await waitForStatus(world, "alpha", (s) => s.plan !== undefined);
  } finally {
    await daemon.stop();
  }
});
