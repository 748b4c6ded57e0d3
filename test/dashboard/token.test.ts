// The dashboard's token: required off loopback (the daemon refuses to start without it), asked for
// "Reconcile now" and plan previews when configured, compared in constant time, never shown.
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bearerTokenOf, dashboardTokenOf, tokenMatches } from "../../src/dashboard/index.js";
import { isShardctlError } from "../../src/errors/index.js";
import type { Daemon } from "../../src/reconciler/index.js";
import { parseSettings, SpecError } from "../../src/spec/index.js";
import { allocateHost } from "../support/test-world.js";
import { definitionText, startInProcessDaemon, startWorld, waitForStatus, writeDefinition, writeSettings, type DaemonWorld } from "../reconciler/daemon-fixture.js";
import { enableDashboard, SseReader } from "./support.js";

const tokenEnv = "SHARDCTL_TEST_DASHBOARD_TOKEN";
const token = "s3cret-dashboard-token-0123456789";

describe("token comparison", () => {
  it("matches only the same token, whatever the lengths (digests of equal size are compared)", () => {
    expect(tokenMatches(token, token)).toBe(true);
    expect(tokenMatches(token, token.slice(0, -1))).toBe(false);
    expect(tokenMatches(token, `${token}x`)).toBe(false);
    expect(tokenMatches(token, "")).toBe(false);
    expect(tokenMatches("short", "a much longer presented token than expected")).toBe(false);
  });

  it("reads a bearer header and nothing else", () => {
    expect(bearerTokenOf(`Bearer ${token}`)).toBe(token);
    expect(bearerTokenOf(`bearer  ${token} `)).toBe(token);
    expect(bearerTokenOf(`Basic ${token}`)).toBeUndefined();
    expect(bearerTokenOf("Bearer a b")).toBeUndefined();
    expect(bearerTokenOf(undefined)).toBeUndefined();
  });

  it("is read from the variable ui_token_env names; off loopback one is required", () => {
    const settings = (text: string) => {
      const result = parseSettings(text, "/srv/shardctl.toml");
      if (!result.ok) throw new Error(JSON.stringify(result.issues));
      return result.value;
    };
    expect(dashboardTokenOf(settings(""), {})).toBeUndefined();
    expect(dashboardTokenOf(settings('[daemon]\nui_address = "127.0.0.1:0"\n'), {})).toBeUndefined();
    const withVariable = settings(`[daemon]\nui_address = "0.0.0.0:8089"\nui_token_env = "${tokenEnv}"\n`);
    expect(dashboardTokenOf(withVariable, { [tokenEnv]: token })).toBe(token);
    for (const env of [{}, { [tokenEnv]: "  " }]) {
      let thrown: unknown;
      try {
        dashboardTokenOf(withVariable, env);
      } catch (error) {
        thrown = error;
      }
      expect(isShardctlError(thrown, "DashboardTokenMissing")).toBe(true);
      expect((thrown as Error).message).toContain(`ui_token_env names ${tokenEnv}`);
    }
    // A token no request can present (the bearer header carries one word of visible ASCII) is refused at start, not 401 for ever.
    for (const unusable of ["two words", `${token}\n`, "tökén", "curly“quote”"]) {
      let thrown: unknown;
      try {
        dashboardTokenOf(withVariable, { [tokenEnv]: unusable });
      } catch (error) {
        thrown = error;
      }
      expect(isShardctlError(thrown, "DashboardTokenMissing"), JSON.stringify(unusable)).toBe(true);
      expect((thrown as Error).message).toContain(`set ${tokenEnv} to one word of visible ASCII`);
    }
  });
});

describe("a daemon whose dashboard is not on loopback", () => {
  let world: DaemonWorld;
  beforeAll(async () => {
    world = await startWorld();
  });
  afterAll(async () => {
    delete process.env[tokenEnv];
    await world?.close();
  });

  it("refuses to start without ui_token_env, naming the setting", async () => {
    await enableDashboard(world, { address: "0.0.0.0:0" });
    const error: unknown = await startInProcessDaemon(world).then(
      async (d) => (await d.stop(), undefined),
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(SpecError);
    expect((error as SpecError).message).toContain("daemon.ui_token_env");
  });

  it("refuses to start when the variable is unset, naming it, and leaves nothing behind", async () => {
    await writeSettings(world);
    await enableDashboard(world, { address: "0.0.0.0:0", tokenEnv });
    delete process.env[tokenEnv];
    const error: unknown = await startInProcessDaemon(world).then(
      async (d) => (await d.stop(), undefined),
      (e: unknown) => e,
    );
    expect(isShardctlError(error, "DashboardTokenMissing")).toBe(true);
    expect((error as Error).message).toContain(tokenEnv);
    // Refused before taking the directory's lock: a daemon starts there at once.
    await writeSettings(world);
    await enableDashboard(world, { address: `${await allocateHost()}:0`, tokenEnv });
    process.env[tokenEnv] = token;
    const daemon = await startInProcessDaemon(world);
    expect(daemon.uiUrl).toMatch(/^http:\/\/127\./);
    await daemon.stop();
  });
});

describe("a dashboard with a token", () => {
  let world: DaemonWorld;
  let daemon: Daemon;
  let base: string;

  beforeAll(async () => {
    process.env[tokenEnv] = token;
    world = await startWorld();
    await enableDashboard(world, { tokenEnv });
    await writeDefinition(world, "alpha", definitionText(world, { nodes: ["l1", "l2"] }));
    daemon = await startInProcessDaemon(world);
    base = daemon.uiUrl!;
    await waitForStatus(world, "alpha", (s) => s.plan !== undefined);
  });

  afterAll(async () => {
    await daemon?.stop();
    await world?.close();
    delete process.env[tokenEnv];
  });

  const reconcile = (authorization?: string) =>
    fetch(new URL("api/clusters/alpha/reconcile", base), { method: "POST", headers: authorization === undefined ? {} : { authorization } });

  it("refuses Reconcile now without the token or with another one (401, any length), takes it with the token", async () => {
    for (const header of [undefined, "Bearer wrong", `Bearer ${token}x`, `Bearer ${"y".repeat(4096)}`, `Basic ${token}`]) {
      const refused = await reconcile(header);
      expect(refused.status, header).toBe(401);
      expect(refused.headers.get("www-authenticate")).toBe('Bearer realm="shardctl"');
      expect(((await refused.json()) as { error: { reason: string } }).error.reason).toBe("DashboardUnauthorized");
    }
    const taken = await reconcile(`Bearer ${token}`);
    expect(taken.status).toBe(202);
    expect(await taken.json()).toEqual({ cluster: "alpha", taken: true });
  });

  it("asks the token for plan previews too, while reads stay open", async () => {
    const text = definitionText(world, { nodes: ["l1"] });
    expect((await fetch(new URL("api/plan", base), { method: "POST", body: text })).status).toBe(401);
    expect((await fetch(new URL("api/plan", base), { method: "POST", body: text, headers: { authorization: `Bearer ${token}` } })).status).toBe(200);
    expect((await fetch(new URL("api/clusters", base))).status).toBe(200);
  });

  it("tells the page a token is required, and never shows it: not in any answer, nor in the log", async () => {
    const stream = new SseReader(new URL("api/events", base).href);
    try {
      const hello = await stream.waitFor((e) => e.event === "hello");
      expect(hello.data).toMatchObject({ tokenRequired: true });
      await stream.waitFor((e) => e.event === "status");
      const everything = [
        JSON.stringify(stream.events),
        await (await fetch(new URL("api/clusters", base))).text(),
        await (await fetch(base)).text(),
        await readFile(join(world.root, "daemon.log"), "utf8"),
      ].join("\n");
      expect(everything).not.toContain(token);
      expect(everything).toContain("reconcile requested from the dashboard");
    } finally {
      stream.close();
    }
  });
});
