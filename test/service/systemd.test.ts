/**
 * The rendered units as systemd itself reads them: `systemd-analyze verify` accepts them without a
 * warning (it also checks that ExecStart's binary exists, so they name the real node), and systemd's
 * own parser reads back every value exactly, for a directory whose path holds spaces, both quotes,
 * %, $, &, < and a backslash.
 */
import { chmod, mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { locateService, renderSystemdUnit, type ServiceDomain, type ServiceSpec } from "../../src/service/index.js";
import { awkwardName, ensureSystemdTools, readBackUnit, shardctlScript, verifyUnit } from "./support.js";

let root: string;
beforeAll(async () => {
  await ensureSystemdTools();
  root = await mkdtemp(join(tmpdir(), "shardctl-service-systemd-"));
  // systemd's test mode runs as nobody here (it refuses root) and must read the units.
  await chmod(root, 0o755);
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

/** Writes the unit for `base/clusters` into a directory of its own and returns where and what. */
async function renderInto(name: string, base: string, domain: ServiceDomain) {
  await mkdir(join(base, "clusters"), { recursive: true });
  const location = locateService({ platform: "systemd", domain, dir: join(base, "clusters"), home: "/root", uid: 0 });
  const spec: ServiceSpec = {
    settingsFile: join(base, "shardctl.toml"),
    nodePath: process.execPath,
    scriptPath: shardctlScript,
    path: `/usr/local/bin:/usr/bin:/bin:/opt/50% "odd"`,
    ...(domain === "system" ? { runAs: "root" } : {}),
    secretEnv: [{ name: "HF_TOKEN", setting: "[hub] token_env" }],
  };
  const unitDir = join(root, name);
  await mkdir(unitDir, { recursive: true, mode: 0o755 });
  await chmod(unitDir, 0o755);
  const file = join(unitDir, location.name);
  await writeFile(file, renderSystemdUnit(location, spec));
  return { location, spec, unitDir, file };
}

describe("systemd reads the unit", () => {
  for (const domain of ["system", "user"] as const) {
    it(`systemd-analyze${domain === "user" ? " --user" : ""} verify accepts the ${domain} unit without a word`, async () => {
      const { file } = await renderInto(`plain-${domain}`, join(root, `gitops-${domain}`), domain);
      const result = await verifyUnit(file, domain);
      expect(result.stderr).toBe("");
      expect(result.code).toBe(0);
    });
  }

  it("verify accepts the unit of a directory with spaces, quotes, %, $, &, < and a backslash", async () => {
    const { file } = await renderInto("awkward-verify", join(root, awkwardName), "system");
    const result = await verifyUnit(file, "system");
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
  });

  it("verify is a real check: it refuses a unit whose ExecStart quoting is broken", async () => {
    const { file } = await renderInto("broken", join(root, "broken"), "system");
    await writeFile(file, `[Service]\nExecStart=${process.execPath} "unbalanced\n`);
    const result = await verifyUnit(file, "system");
    expect(result.code).not.toBe(0);
    expect(result.stderr).toMatch(/quot/i);
  });

  it("systemd's parser reads back the awkward directory exactly: ExecStart's words, WorkingDirectory, Description, Environment", async () => {
    const base = join(root, awkwardName);
    const { location, spec, unitDir } = await renderInto("awkward-readback", base, "user");
    const read = await readBackUnit(unitDir, location.name);
    expect(read.argv).toEqual([process.execPath, shardctlScript, "daemon", "--dir", join(base, "clusters"), "--config", join(base, "shardctl.toml")]);
    expect(read.workingDirectory).toBe(base);
    expect(read.description).toBe(`shardctl daemon watching ${join(base, "clusters")}`);
    expect(read.environment).toBe(`PATH=${spec.path}`);
    expect(read.environmentFile).toBe(`-${location.envFile}`);
  });
});
