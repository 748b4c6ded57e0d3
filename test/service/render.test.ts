/**
 * Rendering: the unit and plist pinned by golden files (regenerate deliberately with UPDATE_GOLDEN=1
 * after reading the diff), the quoting rules value by value, the names, and the secrets that are
 * named but never copied.
 */
import { readFile, writeFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { isShardctlError } from "../../src/errors/index.js";
import { parseSettings } from "../../src/spec/index.js";
import {
  escapeSystemdLine,
  escapeXml,
  locateService,
  quoteEnvironment,
  quoteExecWord,
  renderEnvFile,
  renderLaunchdPlist,
  renderSystemdUnit,
  secretEnvOf,
  serviceSlug,
  servicePathEnv,
  type ServiceSpec,
} from "../../src/service/index.js";
import { awkwardName } from "./support.js";

async function expectGolden(name: string, actual: string): Promise<void> {
  const file = fileURLToPath(new URL(`./golden/${name}`, import.meta.url));
  if (process.env.UPDATE_GOLDEN === "1") await writeFile(file, actual);
  expect(actual).toBe(await readFile(file, "utf8"));
}

const secretEnv = [
  { name: "HF_TOKEN", setting: "[hub] token_env" },
  { name: "ROUTER_ADMIN_TOKEN", setting: "[router] admin_token_env" },
];

function specFor(base: string): ServiceSpec {
  return {
    settingsFile: `${base}/shardctl.toml`,
    nodePath: "/usr/local/bin/node",
    scriptPath: "/usr/local/lib/node_modules/shardctl/dist/src/cli/shardctl.js",
    path: "/usr/local/bin:/usr/bin:/bin",
    runAs: "shardctl",
    secretEnv,
  };
}

const awkward = `/srv/${awkwardName}`;

describe("systemd unit", () => {
  it("runs the daemon as a system service with restart on failure, the journal, and no secret", async () => {
    const location = locateService({ platform: "systemd", domain: "system", dir: "/srv/gitops/clusters", home: "/root", uid: 0 });
    expect(location.file).toBe(`/etc/systemd/system/${location.name}`);
    expect(location.envFile).toBe(`/etc/shardctl/${location.slug}.env`);
    const unit = renderSystemdUnit(location, specFor("/srv/gitops"));
    await expectGolden("system.service", unit);
    expect(unit).not.toContain("--teardown-on-exit");
    expect(unit).toMatch(/^KillMode=process$/m);
    expect(unit).toMatch(/^Restart=on-failure$/m);
  });

  it("as a user service: no User=, no network target, WantedBy=default.target, files under the user's config", async () => {
    const location = locateService({ platform: "systemd", domain: "user", dir: "/home/ops/gitops/clusters", home: "/home/ops", uid: 1000 });
    expect(location.file).toBe(`/home/ops/.config/systemd/user/${location.name}`);
    expect(location.envFile).toBe(`/home/ops/.config/shardctl/${location.slug}.env`);
    const withConfigHome = locateService({ platform: "systemd", domain: "user", dir: "/home/ops/gitops/clusters", home: "/home/ops", configHome: "/cfg", uid: 1000 });
    expect(withConfigHome.file).toBe(`/cfg/systemd/user/${location.name}`);
    await expectGolden("user.service", renderSystemdUnit(location, specFor("/home/ops/gitops")));
  });

  it("escapes a directory with spaces, quotes, %, $, &, < and a backslash", async () => {
    const location = locateService({ platform: "systemd", domain: "system", dir: `${awkward}/clusters`, home: "/root", uid: 0 });
    await expectGolden("awkward-path.service", renderSystemdUnit(location, specFor(awkward)));
  });
});

describe("launchd plist", () => {
  it("runs the daemon as a LaunchDaemon as UserName, KeepAlive on failure, logs under /Library/Logs/shardctl", async () => {
    const location = locateService({ platform: "launchd", domain: "system", dir: "/opt/gitops/clusters", home: "/var/root", uid: 0 });
    expect(location.file).toBe(`/Library/LaunchDaemons/${location.name}.plist`);
    expect(location.logFile).toBe(`/Library/Logs/shardctl/${location.name}.log`);
    expect(location.launchdDomain).toBe("system");
    await expectGolden("system.plist", renderLaunchdPlist(location, specFor("/opt/gitops")));
  });

  it("as a LaunchAgent: no UserName, gui/<uid>, logs under ~/Library/Logs/shardctl", async () => {
    const location = locateService({ platform: "launchd", domain: "user", dir: "/Users/ops/gitops/clusters", home: "/Users/ops", uid: 501 });
    expect(location.file).toBe(`/Users/ops/Library/LaunchAgents/${location.name}.plist`);
    expect(location.logFile).toBe(`/Users/ops/Library/Logs/shardctl/${location.name}.log`);
    expect(location.launchdDomain).toBe("gui/501");
    await expectGolden("user.plist", renderLaunchdPlist(location, specFor("/Users/ops/gitops")));
  });

  it("escapes a directory with spaces, quotes, %, $, &, < and a backslash", async () => {
    const location = locateService({ platform: "launchd", domain: "user", dir: `${awkward}/clusters`, home: "/Users/ops", uid: 501 });
    await expectGolden("awkward-path.plist", renderLaunchdPlist(location, specFor(awkward)));
  });
});

describe("the environment file", () => {
  it("names each variable the settings read and holds no value", async () => {
    const location = locateService({ platform: "systemd", domain: "system", dir: "/srv/gitops/clusters", home: "/root", uid: 0 });
    await expectGolden("environment.env", renderEnvFile(location, specFor("/srv/gitops")));
  });
});

describe("quoting", () => {
  it.each([
    ["/usr/bin/node", "/usr/bin/node"],
    ["/srv/a b", '"/srv/a b"'],
    ["/srv/it's", `"/srv/it's"`],
    ['/srv/say "hi"', '"/srv/say \\"hi\\""'],
    ["/srv/100%", '"/srv/100%%"'],
    ["/srv/$HOME", '"/srv/$$HOME"'],
    ["/srv/${HOME}", '"/srv/$${HOME}"'],
    ["/srv/a\\b", '"/srv/a\\\\b"'],
    ["/srv/a&b<c>;d", '"/srv/a&b<c>;d"'],
    ["", '""'],
  ])("ExecStart word %j is written %s", (value, written) => {
    expect(quoteExecWord("a path", value)).toBe(written);
  });

  it("Environment= escapes % and quotes but leaves $ alone (systemd expands no variables there)", () => {
    expect(quoteEnvironment("PATH", "/usr/bin:/bin")).toBe("PATH=/usr/bin:/bin");
    expect(quoteEnvironment("PATH", '/opt/50% "x" $y:/bin')).toBe('"PATH=/opt/50%% \\"x\\" $y:/bin"');
  });

  it("path settings escape % only, and refuse what a unit line cannot hold", () => {
    expect(escapeSystemdLine("a directory", `/srv/it's "x" 100% $y`)).toBe(`/srv/it's "x" 100%% $y`);
    for (const bad of ["/srv/ends-with-space ", " /srv/leading", "/srv/trailing\\", "/srv/new\nline", "/srv/tab\there"]) {
      expect(() => escapeSystemdLine("a directory", bad), bad).toThrow(expect.objectContaining({ reason: "ServiceValueUnsupported" }));
    }
  });

  it("refuses a control character anywhere, with the reason", () => {
    try {
      quoteExecWord("the watched directory", "/srv/a\nExecStartPre=/bin/rm -rf /");
      expect.unreachable();
    } catch (error) {
      expect(isShardctlError(error, "ServiceValueUnsupported")).toBe(true);
      expect((error as Error).message).toContain("control character");
    }
    expect(() => escapeXml("a path", "/srv/a\u0001b")).toThrow(expect.objectContaining({ reason: "ServiceValueUnsupported" }));
  });

  it("XML escapes &, < and > and keeps quotes as they are", () => {
    expect(escapeXml("a path", `/srv/a & b <c> "d" 'e' 100% $f`)).toBe(`/srv/a &amp; b &lt;c&gt; "d" 'e' 100% $f`);
  });

  it("refuses a --run-as that is not a user name", () => {
    const location = locateService({ platform: "systemd", domain: "system", dir: "/srv/gitops/clusters", home: "/root", uid: 0 });
    expect(() => renderSystemdUnit(location, { ...specFor("/srv/gitops"), runAs: "ops\nExecStartPre=/bin/sh" })).toThrow(
      expect.objectContaining({ reason: "ServiceValueUnsupported" }),
    );
  });
});

describe("names", () => {
  it("one service per directory: stable, distinct for two directories with the same name, readable", () => {
    const a = serviceSlug("/srv/prod/clusters");
    expect(a).toMatch(/^prod-clusters-[0-9a-f]{8}$/);
    expect(serviceSlug("/srv/prod/clusters")).toBe(a);
    expect(serviceSlug("/home/ops/prod/clusters")).not.toBe(a);
    expect(serviceSlug("/srv/prod/clusters")).not.toBe(serviceSlug("/srv/prod/clusters2"));
    expect(serviceSlug(`${awkward}/clusters`)).toMatch(/^it-s-a-dir-50-n-home-x-y-clusters-[0-9a-f]{8}$/);
    expect(serviceSlug("/")).toMatch(/^[0-9a-f]{8}$/);
  });

  it("unit names and labels carry the slug", () => {
    const unit = locateService({ platform: "systemd", domain: "system", dir: "/srv/prod/clusters", home: "/root", uid: 0 });
    const plist = locateService({ platform: "launchd", domain: "system", dir: "/srv/prod/clusters", home: "/root", uid: 0 });
    expect(unit.name).toBe(`shardctl-${unit.slug}.service`);
    expect(plist.name).toBe(`dev.shardctl.${unit.slug}`);
  });
});

describe("environment", () => {
  it("lists every *_env setting of real settings, names only", () => {
    const parsed = parseSettings('[hub]\ntoken_env = "MY_HF"\n\n[router]\nkind = "none"\nadmin_token_env = "ADMIN"\n', "/srv/gitops/shardctl.toml");
    if (!parsed.ok) throw new Error(JSON.stringify(parsed.issues));
    const found = secretEnvOf(parsed.value);
    expect(found).toContainEqual({ name: "MY_HF", setting: "[hub] token_env" });
    expect(found).toContainEqual({ name: "ADMIN", setting: "[router] admin_token_env" });
  });

  it("PATH: node's directory first, the installing shell's absolute entries after, relative ones dropped", () => {
    expect(servicePathEnv("/opt/node/bin/node", "/usr/bin:.:bin:/opt/node/bin:/bin")).toBe("/opt/node/bin:/usr/bin:/bin");
    expect(servicePathEnv("/opt/node/bin/node", undefined)).toBe("/opt/node/bin:/usr/local/bin:/usr/bin:/bin");
  });
});
