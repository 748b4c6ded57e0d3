import { describe, expect, it } from "vitest";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseRouterConfig, readRouterConfig } from "../../src/router/index.js";
import { isShardctlError } from "../../src/errors/index.js";

function reasonOf(text: string): string | undefined {
  try {
    parseRouterConfig(text, "router.yaml");
  } catch (error) {
    if (isShardctlError(error)) return `${error.reason}: ${error.message}`;
    throw error;
  }
  return undefined;
}

describe("readRouterConfig / parseRouterConfig", () => {
  it("reads bind_address and backends, ignoring continuum-only keys", () => {
    const config = parseRouterConfig(
      `server:\n  bind_address: "0.0.0.0:8080"\n  workers: 4\nbackends:\n  - name: a\n    url: http://10.0.0.1:8000\n    weight: 4\n    models: [x]\n    timeout: 30s\n  - name: b\n    url: https://b.example/api\nselection_strategy: RoundRobin\n`,
      "router.yaml",
    );
    expect(config).toEqual({
      bind: { host: "0.0.0.0", port: 8080 },
      backends: [
        { name: "a", url: "http://10.0.0.1:8000", weight: 4, models: ["x"] },
        { name: "b", url: "https://b.example/api", models: [] },
      ],
    });
  });

  it("accepts an empty file and IPv6 bind addresses", () => {
    expect(parseRouterConfig("", "router.yaml")).toEqual({ bind: undefined, backends: [] });
    expect(parseRouterConfig("server:\n  bind_address: '[::1]:0'\nbackends:\n", "r").bind).toEqual({ host: "::1", port: 0 });
  });

  it("refuses what the router could not serve, naming the file and the field", () => {
    expect(reasonOf("backends: [ {name: a\n")).toMatch(/^RouterConfigInvalid: router\.yaml: /);
    expect(reasonOf("backends:\n  - name: a\n    url: nope\n")).toMatch(/^RouterConfigInvalid: router\.yaml: backends\.0\.url/);
    expect(reasonOf("backends:\n  - {name: a, url: 'http://h:1', weight: 0}\n")).toMatch(/backends\.0\.weight/);
    expect(reasonOf("backends:\n  - {name: a, url: 'http://h:1'}\n  - {name: a, url: 'http://h:2'}\n")).toMatch(/duplicate backend name "a"/);
    expect(reasonOf("server:\n  bind_address: localhost\n")).toMatch(/server\.bind_address: expected "host:port"/);
    expect(reasonOf("server:\n  bind_address: 1.2.3.4:70000\n")).toMatch(/server\.bind_address/);
  });
});

describe("readRouterConfig of a file that does not exist", () => {
  it("says which setting names it and what to write in it", async () => {
    const missing = join(tmpdir(), `shardctl-no-router-${process.pid}.yaml`);
    const error = await readRouterConfig(missing).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(isShardctlError(error, "RouterConfigUnreadable")).toBe(true);
    expect((error as Error).message).toContain(`router config ${missing} does not exist (named by [router] config in shardctl.toml, or --config)`);
    expect((error as Error).message).toContain("backends: []");
  });
});
