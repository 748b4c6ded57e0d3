/**
 * A daemon whose dashboard cannot listen (its address taken) fails to start with nothing left
 * half-running: no pass ran (no status file appears), and its lock is given back, so a daemon
 * started once the address is free runs. With the embedded router's address taken too, one start
 * names both.
 */
import { readFile, rm, symlink, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { createServer, type AddressInfo, type Server } from "node:net";
import { expect, it } from "vitest";
import { isShardctlError } from "../../src/errors/index.js";
import { enableDashboard } from "../dashboard/support.js";
import { allocateHost } from "../support/test-world.js";
import { definitionText, readStatusFile, sleep, startInProcessDaemon, waitForStatus, writeDefinition, writeSettings } from "./daemon-fixture.js";
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

/** A server holding a port on `host`, and its port. */
async function holdPort(host: string): Promise<{ holder: Server; port: number }> {
  const holder = createServer();
  await new Promise<void>((resolve) => holder.listen(0, host, resolve));
  return { holder, port: (holder.address() as AddressInfo).port };
}

it("the router's and the dashboard's addresses both taken: one start names both", async () => {
  const { world } = dw;
  const host = await allocateHost();
  const ui = await holdPort(host);
  const routed = await holdPort(host);
  try {
    await writeSettings(world, { enabled: false, router: true });
    await enableDashboard(world, { address: `${host}:${ui.port}` });
    const config = await readFile(world.routerConfig, "utf8");
    await writeFile(world.routerConfig, config.replace(/bind_address: "[^"]*"/, `bind_address: "${host}:${routed.port}"`));
    const failure = await startInProcessDaemon(world).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(isShardctlError(failure, "RouterListenFailed"), String(failure)).toBe(true);
    const message = (failure as Error).message;
    expect(message).toContain(`router cannot listen on ${host}:${routed.port}`);
    expect(message).toContain(`the dashboard cannot listen on ${host}:${ui.port} ([daemon] ui_address in the settings file)`);
  } finally {
    await new Promise<void>((resolve) => ui.holder.close(() => resolve()));
    await new Promise<void>((resolve) => routed.holder.close(() => resolve()));
    await writeFile(world.routerConfig, (await readFile(world.routerConfig, "utf8")).replace(/bind_address: "[^"]*"/, 'bind_address: "127.0.0.1:0"'));
  }
  // Both free again: it starts.
  const daemon = await startInProcessDaemon(world);
  await daemon.stop();
});

// Regression: the watch of the definitions rejected its start on the first entry it could not look
// at, and had no listener for later errors: a symbolic link that loops (git stores links, so one
// commit does it) kept the daemon from starting, or ended it.
it("a definition that is a symbolic link looping on itself: the daemon starts, and the clusters beside it are planned", async () => {
  const { world } = dw;
  await writeSettings(world, { enabled: false });
  await writeDefinition(world, "beside", definitionText(world, { nodes: ["l1", "l2"] }));
  await symlink("loop.toml", join(world.clustersDir, "loop.toml"));
  try {
    const daemon = await startInProcessDaemon(world);
    try {
      await waitForStatus(world, "beside", (s) => s.plan !== undefined);
    } finally {
      await daemon.stop();
    }
  } finally {
    await rm(join(world.clustersDir, "loop.toml"), { force: true });
  }
});
