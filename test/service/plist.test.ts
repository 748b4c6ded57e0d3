/**
 * The rendered plists as a real plist reader sees them (Python's plistlib: expat underneath, then
 * the plist structure): every value reads back exactly, for a directory whose path holds spaces,
 * both quotes, %, $, &, < and a backslash.
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { locateService, renderLaunchdPlist, restartDelaySeconds, stopTimeoutSeconds, type ServiceDomain, type ServiceSpec } from "../../src/service/index.js";
import { awkwardName, readPlist } from "./support.js";

let root: string;
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), "shardctl-service-plist-"));
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

const spec = (base: string): ServiceSpec => ({
  settingsFile: `${base}/shardctl.toml`,
  nodePath: "/opt/homebrew/bin/node",
  scriptPath: "/opt/homebrew/lib/node_modules/shardctl/dist/src/cli/shardctl.js",
  path: "/opt/homebrew/bin:/usr/bin:/bin:/opt/a&b<c>",
  runAs: "ops",
  secretEnv: [{ name: "HF_TOKEN", setting: "[hub] token_env" }],
});

describe("plistlib reads the plist", () => {
  for (const domain of ["system", "user"] as const satisfies readonly ServiceDomain[]) {
    it(`the ${domain} plist reads back value for value, for an awkward directory`, async () => {
      const base = `/Users/ops/${awkwardName}`;
      const location = locateService({ platform: "launchd", domain, dir: `${base}/clusters`, home: "/Users/ops", uid: 501 });
      const file = join(root, `${domain}.plist`);
      await writeFile(file, renderLaunchdPlist(location, spec(base)));
      expect(await readPlist(file)).toEqual({
        Label: location.name,
        ProgramArguments: [
          "/opt/homebrew/bin/node",
          `--env-file=${location.envFile}`,
          "/opt/homebrew/lib/node_modules/shardctl/dist/src/cli/shardctl.js",
          "daemon",
          "--dir",
          `${base}/clusters`,
          "--config",
          `${base}/shardctl.toml`,
        ],
        WorkingDirectory: base,
        EnvironmentVariables: { PATH: "/opt/homebrew/bin:/usr/bin:/bin:/opt/a&b<c>" },
        ...(domain === "system" ? { UserName: "ops" } : {}),
        RunAtLoad: true,
        KeepAlive: { SuccessfulExit: false },
        ThrottleInterval: restartDelaySeconds,
        ExitTimeOut: stopTimeoutSeconds,
        StandardOutPath: location.logFile,
        StandardErrorPath: location.logFile,
      });
    });
  }

  it("plistlib is a real check: it refuses an unescaped &", async () => {
    const file = join(root, "broken.plist");
    const location = locateService({ platform: "launchd", domain: "user", dir: "/Users/ops/a/clusters", home: "/Users/ops", uid: 501 });
    await writeFile(file, renderLaunchdPlist(location, spec("/Users/ops/a")).replace("<string>daemon</string>", "<string>a & b</string>"));
    await expect(readPlist(file)).rejects.toThrow(/plistlib refused/);
  });
});
