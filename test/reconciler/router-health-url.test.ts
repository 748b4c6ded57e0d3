/**
 * Where the daemon asks whether the router answers, from real settings files and router YAML: the
 * setting wins; the embedded router's own URL; the YAML's `server.bind_address` (a wildcard address
 * asked on loopback); nothing to ask behind an admin API, at port 0, or without a router.
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, test } from "vitest";
import { routerHealthUrl } from "../../src/reconciler/router-health-url.js";
import { parseSettings, type Settings } from "../../src/spec/index.js";

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "router-health-url-"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** Settings whose `[router]` table is `lines`, beside a router YAML whose server block binds `bind` (none when undefined). */
async function settingsWith(lines: string[], bind?: string): Promise<Settings> {
  await writeFile(join(dir, "router.yaml"), `${bind === undefined ? "" : `server:\n  bind_address: "${bind}"\n`}backends: []\n`);
  const parsed = parseSettings(["[router]", ...lines, ""].join("\n"), join(dir, "shardctl.toml"));
  if (!parsed.ok) throw new Error(parsed.issues.map((i) => i.message).join("\n"));
  return parsed.value;
}

const file = ['kind = "continuum"', 'config = "router.yaml"'];

test("the YAML's bind address, a wildcard one on loopback", async () => {
  expect(await routerHealthUrl(await settingsWith(file, "10.1.2.3:8088"), undefined)).toBe("http://10.1.2.3:8088/health");
  expect(await routerHealthUrl(await settingsWith(file, "0.0.0.0:8088"), undefined)).toBe("http://127.0.0.1:8088/health");
  expect(await routerHealthUrl(await settingsWith(file, "[::]:8088"), undefined)).toBe("http://[::1]:8088/health");
  expect(await routerHealthUrl(await settingsWith(file, "[fd00::7]:8088"), undefined)).toBe("http://[fd00::7]:8088/health");
});

test("health_url wins; the embedded router is asked where it listens", async () => {
  expect(await routerHealthUrl(await settingsWith([...file, 'health_url = "http://router.lan:9000/healthz"'], "0.0.0.0:8088"), undefined)).toBe(
    "http://router.lan:9000/healthz",
  );
  expect(await routerHealthUrl(await settingsWith([...file, "embedded = true"], "127.0.0.1:0"), "http://127.0.0.1:41234")).toBe("http://127.0.0.1:41234/health");
});

test("an admin API: /health at its origin, whatever the YAML says", async () => {
  expect(await routerHealthUrl(await settingsWith([...file, 'admin_url = "http://127.0.0.1:9000/api/v1"'], "127.0.0.1:8088"), undefined)).toBe(
    "http://127.0.0.1:9000/health",
  );
});

test("nothing to ask: no router, port 0 or no bind address; a YAML that does not parse is an error, not a guess", async () => {
  expect(await routerHealthUrl(await settingsWith(['kind = "none"']), undefined)).toBeUndefined();
  expect(await routerHealthUrl(await settingsWith(file, "127.0.0.1:0"), undefined)).toBeUndefined();
  expect(await routerHealthUrl(await settingsWith(file), undefined)).toBeUndefined();
  const settings = await settingsWith(file);
  await writeFile(join(dir, "router.yaml"), "server: [unclosed\n");
  await expect(routerHealthUrl(settings, undefined)).rejects.toThrow(/router\.yaml/);
});
