/**
 * The admin-API registrar against a local server speaking the configured paths (continuum-router
 * cannot run here, and its real admin paths are unknown, which is why they are settings).
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createRegistrar, type BackendEntry } from "../../src/router/index.js";
import { isShardctlError } from "../../src/errors/index.js";
import { parseSettings } from "../../src/spec/index.js";
import { allocateHost } from "../support/test-world.js";

let server: Server;
let adminUrl: string;
const store = new Map<string, BackendEntry>();
const seen: string[] = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      seen.push(`${req.method} ${req.url} ${req.headers.authorization ?? "-"}`);
      if (req.headers.authorization !== "Bearer s3cret") return void res.writeHead(401).end();
      const match = /^\/api\/v2\/backends(?:\/([^/]+))?$/.exec(req.url ?? "");
      if (match === null) return void res.writeHead(404).end();
      if (req.method === "GET") return void res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ backends: [...store.values()] }));
      if (req.method === "POST") {
        const entry = JSON.parse(Buffer.concat(chunks).toString()) as BackendEntry;
        store.set(entry.name, entry);
        return void res.writeHead(201).end();
      }
      if (req.method === "DELETE" && match[1] !== undefined) {
        const name = decodeURIComponent(match[1]);
        const existed = store.delete(name);
        return void res.writeHead(existed ? 204 : 404).end();
      }
      res.writeHead(405).end();
    });
  });
  const host = await allocateHost();
  await new Promise<void>((done) => server.listen(0, host, done));
  adminUrl = `http://${host}:${(server.address() as AddressInfo).port}/api`;
  process.env.SHARDCTL_TEST_ROUTER_TOKEN = "s3cret";
});
afterAll(async () => {
  delete process.env.SHARDCTL_TEST_ROUTER_TOKEN;
  await new Promise((done) => server.close(done));
});

const paths = { list: "/v2/backends", register: "/v2/backends", deregister: "/v2/backends/{name}" };

describe("continuum admin API registrar", () => {
  it("registers, looks up, lists and deregisters through the configured paths with the bearer token", async () => {
    const registrar = createRegistrar({ kind: "continuum", adminUrl, adminTokenEnv: "SHARDCTL_TEST_ROUTER_TOKEN", adminPaths: paths });
    const entry = { name: "llama pp", url: "http://127.0.0.1:9100", models: ["llama"], weight: 2 };
    await registrar.register(entry);
    expect(await registrar.lookup("llama pp")).toEqual(entry);
    expect(await registrar.list()).toEqual([entry]);
    await registrar.deregister("llama pp");
    await registrar.deregister("llama pp");
    expect(await registrar.list()).toEqual([]);
    expect(seen).toContain("DELETE /api/v2/backends/llama%20pp Bearer s3cret");
    expect(seen).toContain("POST /api/v2/backends Bearer s3cret");
  });

  it("reports a rejected call as RouterRegistrationFailed, and a missing token as terminal", async () => {
    process.env.SHARDCTL_TEST_ROUTER_TOKEN_WRONG = "nope";
    const wrong = createRegistrar({ kind: "continuum", adminUrl, adminTokenEnv: "SHARDCTL_TEST_ROUTER_TOKEN_WRONG", adminPaths: paths });
    const rejected: unknown = await wrong.register({ name: "a", url: "http://127.0.0.1:1", models: ["m"] }).catch((error: unknown) => error);
    expect(isShardctlError(rejected, "RouterRegistrationFailed")).toBe(true);
    expect((rejected as Error).message).toContain("HTTP 401");
    delete process.env.SHARDCTL_TEST_ROUTER_TOKEN_WRONG;

    const missing = createRegistrar({ kind: "continuum", adminUrl, adminTokenEnv: "SHARDCTL_TEST_ROUTER_TOKEN_UNSET", adminPaths: paths });
    const error: unknown = await missing.register({ name: "a", url: "http://127.0.0.1:1", models: ["m"] }).catch((caught: unknown) => caught);
    expect(isShardctlError(error, "RouterRegistrationFailed")).toBe(true);
    expect((error as { terminal: boolean }).terminal).toBe(true);
  });
});

// Regression: the paths were options of the registrar that no setting reached: with admin_url set,
// the guessed /admin/backends was always used.
describe("[router] admin_paths in shardctl.toml", () => {
  it("reach the registrar the daemon builds from the settings", async () => {
    const settings = parseSettings(
      [
        "[router]",
        'kind = "continuum"',
        'config = "router.yaml"',
        `admin_url = "${adminUrl}"`,
        'admin_token_env = "SHARDCTL_TEST_ROUTER_TOKEN"',
        "[router.admin_paths]",
        `list = "${paths.list}"`,
        `register = "${paths.register}"`,
        `deregister = "${paths.deregister}"`,
      ].join("\n"),
      "/etc/shardctl/shardctl.toml",
    );
    if (!settings.ok) throw new Error(JSON.stringify(settings.issues));
    const registrar = createRegistrar(settings.value.router);
    const entry = { name: "from-settings", url: "http://127.0.0.1:9101", models: ["m"], weight: 1 };
    await registrar.register(entry);
    expect(await registrar.lookup("from-settings")).toEqual(entry);
    await registrar.deregister("from-settings");
    expect(seen.filter((line) => line.includes("from-settings") || line.startsWith("POST")).at(-1)).toMatch(/^DELETE \/api\/v2\/backends\/from-settings /);
  });

  it("a path with '..' or a space is refused, naming the key", () => {
    const settings = parseSettings(
      `[router]\nkind = "continuum"\nconfig = "router.yaml"\nadmin_url = "${adminUrl}"\n[router.admin_paths]\nlist = "/v2/../admin"\nregister = "/a b"\n`,
      "/etc/shardctl/shardctl.toml",
    );
    expect(settings.ok).toBe(false);
    if (settings.ok) return;
    expect(settings.issues.map((i) => i.path).sort()).toEqual(["router.admin_paths.list", "router.admin_paths.register"]);
  });
});
