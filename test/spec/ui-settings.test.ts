// `[daemon] ui_address` and `ui_token_env`: off by default, loopback without a token, anything
// else only with the token's variable named.
import { describe, expect, it } from "vitest";
import { formatIssue, isLoopbackAddress, parseSettings } from "../../src/spec/index.js";

const file = "/srv/ops/shardctl.toml";

describe("dashboard settings", () => {
  it("are off by default", () => {
    const result = parseSettings("", file);
    expect(result.ok && result.value.daemon.uiAddress).toBeUndefined();
    expect(result.ok && result.value.daemon.uiTokenEnv).toBeUndefined();
  });

  it("take a loopback address (port 0 included) without a token", () => {
    for (const address of ["127.0.0.1:8089", "127.0.0.1:0", "localhost:8089", "[::1]:8089"]) {
      const result = parseSettings(`[daemon]\nui_address = "${address}"\n`, file);
      expect(result.ok, address).toBe(true);
      expect(result.ok && result.value.daemon.uiAddress).toBe(address);
    }
  });

  it("refuse a non-loopback address without ui_token_env, naming the setting at its table", () => {
    for (const address of ["0.0.0.0:8089", "10.0.0.5:8089", "dashboard.example:8089", "[::]:8089"]) {
      const result = parseSettings(`[daemon]\nresync_seconds = 30\nui_address = "${address}"\n`, file);
      expect(result.ok, address).toBe(false);
      const lines = result.issues.map(formatIssue);
      expect(lines, address).toHaveLength(1);
      expect(lines[0]).toContain("daemon.ui_token_env");
      expect(lines[0]).toContain("is required when daemon.ui_address");
      expect(lines[0]).toMatch(/^\/srv\/ops\/shardctl\.toml:\d+:\d+: /);
    }
  });

  it("take a non-loopback address with the token's variable", () => {
    const result = parseSettings('[daemon]\nui_address = "0.0.0.0:8089"\nui_token_env = "SHARDCTL_UI_TOKEN"\n', file);
    expect(result.ok && result.value.daemon).toMatchObject({ uiAddress: "0.0.0.0:8089", uiTokenEnv: "SHARDCTL_UI_TOKEN" });
  });

  it("refuse malformed values", () => {
    expect(parseSettings('[daemon]\nui_address = "8089"\n', file).ok).toBe(false);
    expect(parseSettings('[daemon]\nui_address = "127.0.0.1:8089"\nui_token_env = "1BAD"\n', file).ok).toBe(false);
  });

  it("tell loopback from the rest", () => {
    expect(["127.0.0.1:1", "127.9.8.7:1", "localhost:1", "LOCALHOST:1", "[::1]:1"].map(isLoopbackAddress)).toEqual([true, true, true, true, true]);
    expect(["0.0.0.0:1", "128.0.0.1:1", "127.0.0.256:1", "127.0.0.1.example:1", "[::]:1", "host:1"].map(isLoopbackAddress)).toEqual([
      false,
      false,
      false,
      false,
      false,
      false,
    ]);
  });
});
