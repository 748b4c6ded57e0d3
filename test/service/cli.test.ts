/**
 * `shardctl service` end to end, as a real process of the built CLI (run `npm run build` first),
 * into temp roots and a temp home. No service manager runs here (this machine's init is not
 * systemd, and the user manager is made unreachable), so install writes and exits 3 with what to
 * run; the tests that use --root never ask one anywhere.
 */
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, readFile, readdir, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir, userInfo } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { locateService, renderSystemdUnit, secretEnvOf, servicePathEnv, type ServiceLocation } from "../../src/service/index.js";
import { loadSettings } from "../../src/spec/index.js";
import { awkwardName, ensureSystemdTools, readPlist, runFile, shardctl, shardctlScript, verifyUnit } from "./support.js";

const secretValue = "hf_secret_value_do_not_copy_7731";

let work: string;
let base: string;
let settingsFile: string;
let home: string;
let env: NodeJS.ProcessEnv;

beforeAll(async () => {
  await ensureSystemdTools();
  work = await mkdtemp(join(tmpdir(), "shardctl-service-cli-"));
  base = join(work, awkwardName);
  home = join(work, "home");
  await mkdir(join(base, "clusters"), { recursive: true });
  await mkdir(home);
  settingsFile = join(base, "shardctl.toml");
  await writeFile(settingsFile, '[hub]\ntoken_env = "HF_TOKEN"\n\n[router]\nkind = "none"\nadmin_token_env = "ROUTER_ADMIN_TOKEN"\n');
  env = { ...process.env, HOME: home, HF_TOKEN: secretValue };
  // Nothing may reach a user manager of whoever runs the tests.
  for (const key of ["XDG_CONFIG_HOME", "XDG_RUNTIME_DIR", "DBUS_SESSION_BUS_ADDRESS", "SUDO_USER"]) delete env[key];
});
afterAll(async () => {
  await rm(work, { recursive: true, force: true });
});

const systemLocation = (): ServiceLocation => locateService({ platform: "systemd", domain: "system", dir: join(base, "clusters"), home, uid: process.getuid?.() ?? 0 });

function service(...args: string[]) {
  return shardctl(["service", ...args, "--config", settingsFile], env, work);
}

/** Every file under `dir`, recursively. */
async function filesUnder(dir: string): Promise<string[]> {
  if (!existsSync(dir)) return [];
  const entries = await readdir(dir, { recursive: true, withFileTypes: true });
  return entries.filter((entry) => entry.isFile()).map((entry) => join(entry.parentPath, entry.name));
}

describe("shardctl service install|status|uninstall --root", () => {
  it("writes the unit 0644 even under umask 077 and the env file 0600, exits 3 with what to run, and copies no secret", async () => {
    const root = join(work, "root-1");
    const location = systemLocation();
    const unit = join(root, location.file);
    const envFile = join(root, location.envFile);
    // umask 077 would make a plain write 0600: the mode is set, not left to the installer's umask.
    const installed = await runFile(
      "sh",
      [
        "-c",
        'umask 077; exec "$@"',
        "sh",
        process.execPath,
        shardctlScript,
        "service",
        "install",
        "--platform",
        "systemd",
        "--root",
        root,
        "--run-as",
        "root",
        "--config",
        settingsFile,
      ],
      {
        env,
        cwd: work,
      },
    );
    expect(installed.stderr).toContain("not loaded: the files are staged under");
    expect(installed.stderr).toContain(`systemctl enable ${location.name}`);
    expect(installed.code).toBe(3);
    expect(installed.stdout).toContain(`wrote ${unit}`);
    expect(installed.stdout).toContain("HF_TOKEN is set in this shell: not copied");
    expect(installed.stdout).toContain("ROUTER_ADMIN_TOKEN ([router] admin_token_env)");

    expect((await stat(unit)).mode & 0o777).toBe(0o644);
    expect((await stat(envFile)).mode & 0o777).toBe(0o600);
    const settings = await loadSettings(settingsFile);
    const expected = renderSystemdUnit(location, {
      settingsFile,
      nodePath: process.execPath,
      scriptPath: shardctlScript,
      path: servicePathEnv(process.execPath, env.PATH),
      runAs: "root",
      secretEnv: secretEnvOf(settings),
    });
    expect(await readFile(unit, "utf8")).toBe(expected);
    expect(await readFile(envFile, "utf8")).toMatch(/^# HF_TOKEN=/m);
    // The installed unit, as systemd-analyze sees it (its ExecStart names this very node).
    const verified = await verifyUnit(unit, "system");
    expect(verified.stderr).toBe("");
    expect(verified.code).toBe(0);
    for (const file of await filesUnder(root)) expect(await readFile(file, "utf8"), file).not.toContain(secretValue);
    expect(installed.stdout + installed.stderr).not.toContain(secretValue);

    const status = await service("status", "--platform", "systemd", "--root", root);
    expect(status.stdout).toContain(`file      ${unit}: installed`);
    expect(status.stdout).toContain("state     unknown: the files are staged under");
    expect(status.stdout).toContain(`env file  ${envFile}: mode 600`);
    expect(status.code).toBe(3);

    // An upgrade rewrites the unit and keeps the operator's environment file as it is.
    await writeFile(envFile, "HF_TOKEN=operator-value\n");
    const again = await service("install", "--platform", "systemd", "--root", root, "--run-as", "root");
    expect(again.code).toBe(3);
    expect(again.stdout).toContain(`rewrote ${unit}`);
    expect(again.stdout).toContain(`kept ${envFile}`);
    expect(await readFile(envFile, "utf8")).toBe("HF_TOKEN=operator-value\n");

    const removed = await service("uninstall", "--platform", "systemd", "--root", root);
    expect(removed.stdout).toContain(`removed ${unit}`);
    expect(removed.stdout).toContain(`kept ${envFile}`);
    expect(removed.stderr).toContain(`systemctl disable --now ${location.name}`);
    expect(removed.code).toBe(3);
    expect(existsSync(unit)).toBe(false);
    expect(existsSync(envFile)).toBe(true);

    const after = await service("status", "--platform", "systemd", "--root", root);
    expect(after.stdout).toContain(`${unit}: not installed`);
    expect(after.code).toBe(4);
    const twice = await service("uninstall", "--platform", "systemd", "--root", root);
    expect(twice.stdout).toContain("not installed: nothing at");
    expect(twice.code).toBe(0);
  });

  it("--dry-run prints the unit and the commands and writes nothing", async () => {
    const root = join(work, "root-dry");
    const location = systemLocation();
    const dry = await service("install", "--platform", "systemd", "--root", root, "--dry-run");
    expect(dry.code).toBe(0);
    expect(dry.stdout).toContain(`# ${location.file} (mode 0644)`);
    expect(dry.stdout).toContain("KillMode=process");
    expect(dry.stdout).toContain(`systemctl restart ${location.name}`);
    expect(existsSync(root)).toBe(false);
    // Without --root too: nothing lands where systemd would read it.
    const real = await service("install", "--platform", "systemd", "--dry-run");
    expect(real.code).toBe(0);
    expect(existsSync(location.file)).toBe(false);
    expect(existsSync(location.envFile)).toBe(false);
    const dryRemove = await service("uninstall", "--platform", "systemd", "--dry-run");
    expect(dryRemove.code).toBe(0);
    expect(dryRemove.stdout).toContain(`systemctl disable --now ${location.name}`);
  });

  it("refuses to replace or remove a unit that is not shardctl's, unless --force", async () => {
    const root = join(work, "root-foreign");
    const unit = join(root, systemLocation().file);
    const foreign = "[Service]\nExecStart=/usr/bin/true\n";
    await mkdir(join(unit, ".."), { recursive: true });
    await writeFile(unit, foreign);
    for (const action of ["install", "uninstall"]) {
      const refused = await service(action, "--platform", "systemd", "--root", root);
      expect(refused.stderr).toContain(`${unit} was not written by shardctl`);
      expect(refused.stderr).toContain("--force");
      expect(refused.code).toBe(1);
      expect(await readFile(unit, "utf8")).toBe(foreign);
    }
    const status = await service("status", "--platform", "systemd", "--root", root);
    expect(status.stdout).toContain("present, but not written by shardctl");
    expect(status.code).toBe(4);
    const forced = await service("install", "--platform", "systemd", "--root", root, "--force");
    expect(forced.code).toBe(3);
    expect(await readFile(unit, "utf8")).toContain("shardctl-managed");
  });

  it("writes the launchd plist for --user under the root, and plistlib reads the awkward directory back", async () => {
    const root = join(work, "root-launchd");
    const location = locateService({ platform: "launchd", domain: "user", dir: join(base, "clusters"), home, uid: process.getuid?.() ?? 0 });
    const installed = await service("install", "--platform", "launchd", "--user", "--root", root);
    expect(installed.stderr).toContain(`launchctl bootstrap ${location.launchdDomain}`);
    expect(installed.code).toBe(3);
    const plist = join(root, location.file);
    expect((await stat(plist)).mode & 0o777).toBe(0o644);
    expect((await stat(join(root, location.envFile))).mode & 0o777).toBe(0o600);
    expect((await stat(join(root, location.logFile!, ".."))).isDirectory()).toBe(true);
    const read = await readPlist(plist);
    expect(read.ProgramArguments).toEqual([
      process.execPath,
      `--env-file=${location.envFile}`,
      shardctlScript,
      "daemon",
      "--dir",
      join(base, "clusters"),
      "--config",
      settingsFile,
    ]);
    expect(read.WorkingDirectory).toBe(base);
    expect(read.KeepAlive).toEqual({ SuccessfulExit: false });
    expect(read.UserName).toBeUndefined();
    expect(await readFile(plist, "utf8")).not.toContain(secretValue);
  });

  it("refuses a settings file that does not load, before writing anything", async () => {
    const root = join(work, "root-bad");
    const bad = join(work, "bad.toml");
    await writeFile(bad, "[hub\n");
    const run = await shardctl(["service", "install", "--platform", "systemd", "--root", root, "--config", bad, "--dir", join(base, "clusters")], env, work);
    expect(run.code).toBe(1);
    expect(existsSync(root)).toBe(false);
  });
});

describe("shardctl service without --root asks the real service manager", () => {
  it("none runs here: the --user unit is written where systemd would read it, exit 3 says why, status says unknown", async () => {
    const location = locateService({ platform: "systemd", domain: "user", dir: join(base, "clusters"), home, uid: process.getuid?.() ?? 0 });
    expect(location.file.startsWith(home)).toBe(true);
    const installed = await service("install", "--user", "--platform", "systemd");
    expect(installed.stderr).toMatch(/^not loaded: no service manager: /m);
    expect(installed.stderr).toContain(`systemctl --user enable ${location.name}`);
    expect(installed.stdout).toContain(`loginctl enable-linger ${userInfo().username}`);
    expect(installed.code).toBe(3);
    expect((await stat(location.file)).mode & 0o777).toBe(0o644);

    const status = await service("status", "--user", "--platform", "systemd");
    expect(status.stdout).toMatch(/^state {5}unknown: no service manager: /m);
    expect(status.code).toBe(3);

    const removed = await service("uninstall", "--user", "--platform", "systemd");
    expect(removed.stderr).toMatch(/^not unloaded: no service manager: /m);
    expect(removed.code).toBe(3);
    expect(existsSync(location.file)).toBe(false);
  });

  it("usage: an action is required, and --run-as is for system services", async () => {
    expect((await service()).code).toBe(1);
    const runAs = await service("install", "--user", "--run-as", "ops");
    expect(runAs.stderr).toContain("--run-as is for system services");
    expect(runAs.code).toBe(1);
  });
});
