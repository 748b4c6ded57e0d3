/** `shardctl validate` as a real process (run `npm run build` first: it spawns dist/src/cli/shardctl.js). */
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { cp, mkdir, mkdtemp, readdir, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const repoRoot = fileURLToPath(new URL("../../", import.meta.url));
const cli = join(repoRoot, "dist/src/cli/shardctl.js");

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

function validate(cwd: string, ...args: string[]): Promise<Run> {
  return new Promise((resolve) => {
    execFile(process.execPath, [cli, "validate", ...args], { cwd, timeout: 20_000 }, (error, stdout, stderr) => {
      const code = error === null ? 0 : typeof error.code === "number" ? error.code : -1;
      resolve({ code, stdout, stderr });
    });
  });
}

const settings = `#:schema ./schemas/settings.schema.json
[nodes.studio-1]
host = "10.0.0.1"
model_dir = "/models"

[nodes.studio-2]
host = "10.0.0.2"
model_dir = "/models"
`;

describe("shardctl validate", () => {
  let dir: string;
  beforeAll(async () => {
    if (!existsSync(cli)) throw new Error(`${cli} is missing: run \`npm run build\` first`);
    dir = await mkdtemp(join(tmpdir(), "shardctl-validate-"));
    await mkdir(join(dir, "clusters"));
    await writeFile(join(dir, "shardctl.toml"), settings);
    await writeFile(join(dir, "clusters", "llama.toml"), 'nodes = ["studio-1", "studio-2"]\n\n[model]\nid = "org/llama"\n');
    await writeFile(join(dir, "clusters", "qwen.toml"), 'nodes = ["studio-2", "studio-1"]\n\n[model]\nid = "org/qwen"\n\n[coordinator]\nport = 8081\n');
    await mkdir(join(dir, "clash"));
    await writeFile(join(dir, "clash", "a.toml"), 'nodes = ["studio-1", "studio-2"]\n\n[model]\nid = "org/a"\n\n[coordinator]\nhost = "127.0.0.1"\n  port = 8080\n');
    await writeFile(join(dir, "clash", "b.toml"), 'nodes = ["studio-2", "studio-1"]\n\n[model]\nid = "org/b"\n');
    await mkdir(join(dir, "backends"));
    await writeFile(join(dir, "backends", "llama.toml"), 'nodes = ["studio-1", "studio-2"]\n\n[model]\nid = "org/llama"\n');
    await writeFile(
      join(dir, "backends", "llama-canary.toml"),
      'nodes = ["studio-2", "studio-1"]\n\n[model]\nid = "org/llama"\n\n[coordinator]\nport = 8081\n\n[router]\nbackend = "llama"\n',
    );
    await writeFile(join(dir, "clusters", "qwen.status.json"), "{}");
    await mkdir(join(dir, "bad"));
    await writeFile(join(dir, "bad", "llama.toml"), 'nodes = ["studio-1", "studio-3"]\nextra = true\n\n[model]\nid = "x; rm -rf ~"\n');
    await writeFile(join(dir, "bad", "broken.toml"), 'nodes = ["studio-1"\n');
    await writeFile(join(dir, "bad-settings.toml"), '[nodes.studio-1]\nhost = "10.0.0.1"\n');
    // A directory that holds its settings file beside the definitions.
    await mkdir(join(dir, "together"));
    await writeFile(join(dir, "together", "shardctl.toml"), settings);
    await writeFile(join(dir, "together", "llama.toml"), 'nodes = ["studio-1", "studio-2"]\n\n[model]\nid = "org/llama"\n');
    await mkdir(join(dir, "together-bad"));
    await writeFile(join(dir, "together-bad", "shardctl.toml"), '[nodes.studio-1]\nhost = "10.0.0.1"\n');
    await writeFile(join(dir, "together-bad", "llama.toml"), 'nodes = ["studio-1", "studio-2"]\n\n[model]\nid = "org/llama"\n');
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("exits 0 on a valid directory and says how many files it checked, settings and definitions apart", async () => {
    const run = await validate(dir, "clusters");
    expect(run).toEqual({ code: 0, stdout: "ok: 1 settings file, 2 definitions\n", stderr: "" });
    expect(await validate(dir, "clusters/llama.toml")).toEqual({ code: 0, stdout: "ok: 1 settings file, 1 definition\n", stderr: "" });
  });

  // Regression: a shardctl.toml inside the directory (or named in the list) was counted, and
  // checked, as a cluster definition.
  it("a named directory that holds no definition is an error, pointing at clusters/ when it is there (a repository's root)", async () => {
    await mkdir(join(dir, "checkout", "clusters"), { recursive: true });
    await writeFile(join(dir, "checkout", "clusters", "llama.toml"), 'nodes = ["studio-1", "studio-2"]\n\n[model]\nid = "org/llama"\n');
    expect(await validate(dir, "checkout")).toEqual({
      code: 1,
      stdout: "",
      stderr: expect.stringMatching(
        /^shardctl: checkout: no cluster definitions \(\*\.toml\) in this directory: the definitions are in checkout\/clusters; name that directory\n/,
      ),
    });
    await mkdir(join(dir, "empty"), { recursive: true });
    expect(await validate(dir, "empty")).toMatchObject({
      code: 1,
      stderr: expect.stringMatching(/^shardctl: empty: no cluster definitions \(\*\.toml\) in this directory\n/),
    });
  });

  it("-h after -- is a path to check, not a request for help", async () => {
    const run = await validate(dir, "--", "-h");
    expect(run.code).toBe(1);
    expect(run.stdout).not.toContain("usage:");
    expect(run.stderr).toMatch(/-h: no such file or directory/);
  });

  it("validates a settings file found in a directory or named in the list as settings, counted apart", async () => {
    expect(await validate(dir, "together")).toEqual({ code: 0, stdout: "ok: 2 settings files, 1 definition\n", stderr: "" });
    expect(await validate(dir, "--config", "together/shardctl.toml", "together")).toEqual({ code: 0, stdout: "ok: 1 settings file, 1 definition\n", stderr: "" });
    expect(await validate(dir, "shardctl.toml", "together/shardctl.toml", "clusters/qwen.toml")).toEqual({
      code: 0,
      stdout: "ok: 2 settings files, 1 definition\n",
      stderr: "",
    });
    const bad = await validate(dir, "together-bad");
    expect(bad.code).toBe(1);
    expect(bad.stderr.split("\n")).toEqual([
      "together-bad/shardctl.toml:1:1: nodes.studio-1.model_dir: is required",
      "1 problem in 1 file (checked 2 settings files, 1 definition)",
      "",
    ]);
  });

  // Regression: settings under another name, named on the command line, were checked as a cluster
  // definition: "model: is required" and an unknown key for each of its tables, nothing about
  // the settings themselves.
  it("validates a named file that holds settings tables as settings, whatever its name", async () => {
    await writeFile(join(dir, "prod-settings.toml"), settings);
    expect(await validate(dir, "prod-settings.toml", "clusters/llama.toml")).toEqual({ code: 0, stdout: "ok: 2 settings files, 1 definition\n", stderr: "" });
    const bad = await validate(dir, "bad-settings.toml");
    expect(bad.code).toBe(1);
    expect(bad.stderr.split("\n")).toEqual([
      "bad-settings.toml:1:1: nodes.studio-1.model_dir: is required",
      "1 problem in 1 file (checked 2 settings files, 0 definitions)",
      "",
    ]);
    // Found in a directory under another name, it stays a definition: the daemon takes it as one.
    await mkdir(join(dir, "stray"));
    await writeFile(join(dir, "stray", "prod-settings.toml"), settings);
    const stray = await validate(dir, "stray");
    expect(stray.code).toBe(1);
    expect(stray.stderr).toContain("stray/prod-settings.toml:1:1: model: is required");
  });

  it("validates settings under another name alone in a folder with no shardctl.toml; definitions there still need one", async () => {
    const alone = await mkdtemp(join(tmpdir(), "shardctl-validate-alone-"));
    try {
      await writeFile(join(alone, "other.toml"), settings);
      expect(await validate(alone, "other.toml")).toEqual({ code: 0, stdout: "ok: 1 settings file, 0 definitions\n", stderr: "" });
      await writeFile(join(alone, "bad.toml"), '[nodes.studio-1]\nhost = "10.0.0.1"\n');
      const bad = await validate(alone, "bad.toml");
      expect(bad.code).toBe(1);
      expect(bad.stderr).toContain("bad.toml:1:1: nodes.studio-1.model_dir: is required");
      await writeFile(join(alone, "llama.toml"), 'nodes = ["studio-1"]\n[model]\nid = "org/name"\n');
      const definition = await validate(alone, "other.toml", "llama.toml");
      expect(definition.code).toBe(1);
      expect(definition.stderr).toContain(
        "shardctl.toml: no settings file here, and cluster definitions are checked against its node registry (pass --config <file>, or create shardctl.toml)",
      );
      const missing = await validate(alone, "--config", "nosuch.toml", "other.toml");
      expect(missing.stderr).toContain("nosuch.toml: cannot read the settings file given with --config (is the path right?)");
    } finally {
      await rm(alone, { recursive: true, force: true });
    }
  });

  it("refuses two definitions whose coordinators share an address, at the port key of each", async () => {
    const run = await validate(dir, "clash");
    expect(run.code).toBe(1);
    expect(run.stderr.split("\n")).toEqual([
      "clash/a.toml:8:3: coordinator.port: 127.0.0.1:8080 on local is also the coordinator address of clash/b.toml; give each cluster its own [coordinator] port",
      "clash/b.toml:1:1: coordinator.port: 127.0.0.1:8080 on local is also the coordinator address of clash/a.toml; give each cluster its own [coordinator] port",
      "2 problems in 2 files (checked 1 settings file, 2 definitions)",
      "",
    ]);
  });

  it("a settings file in a directory that cannot be opened (a link to nothing) is a located problem, not a stack trace", async () => {
    await mkdir(join(dir, "dangling"));
    await writeFile(join(dir, "dangling", "a.toml"), 'nodes = ["studio-1", "studio-2"]\n\n[model]\nid = "org/a"\n');
    await symlink(join(dir, "no-such-file"), join(dir, "dangling", "shardctl.toml"));
    const run = await validate(dir, "dangling");
    expect(run.code).toBe(1);
    expect(run.stderr.split("\n")).toEqual([
      `dangling/shardctl.toml:1:1: cannot read this settings file: ENOENT: no such file or directory, open 'dangling/shardctl.toml'`,
      "1 problem in 1 file (checked 2 settings files, 1 definition)",
      "",
    ]);
  });

  it("refuses two definitions registered under one router backend (a copy that kept the name), at the backend key of each", async () => {
    const run = await validate(dir, "backends");
    expect(run.code).toBe(1);
    expect(run.stderr.split("\n")).toEqual([
      'backends/llama-canary.toml:10:1: router.backend: router backend "llama" is also the backend of backends/llama.toml: one router entry cannot route to two clusters; give each its own [router] backend',
      'backends/llama.toml:1:1: router.backend: router backend "llama" is also the backend of backends/llama-canary.toml: one router entry cannot route to two clusters; give each its own [router] backend',
      "2 problems in 2 files (checked 1 settings file, 2 definitions)",
      "",
    ]);
  });

  it("exits 1 and prints every problem as file:line:col: path: message", async () => {
    const run = await validate(dir, "bad", "clusters/llama.toml");
    expect(run.code).toBe(1);
    expect(run.stderr.split("\n")).toEqual([
      'bad/broken.toml:1:9: invalid TOML: unclosed array: this "[" has no matching "]"',
      'bad/llama.toml:1:22: nodes[1]: unknown node "studio-3" (registered: studio-1, studio-2)',
      "bad/llama.toml:2:1: extra: unknown key (allowed: name, desired, suspend, nodes, model, engine, transport, coordinator, plan, router)",
      `bad/llama.toml:5:6: model.id: "x; rm -rf ~" is not allowed: expected a Hub repository id 'org/name' or a path of letters, digits and '. _ - + @ /' (absolute, '~/' or relative), without '..' segments`,
      "4 problems in 2 files (checked 1 settings file, 3 definitions)",
      "",
    ]);
    expect(run.stdout).toBe("");
  });

  it("validates the settings given by --config, including when it is named as a path", async () => {
    const run = await validate(dir, "--config", "bad-settings.toml", "bad-settings.toml", "clusters");
    expect(run.code).toBe(1);
    expect(run.stderr.split("\n")).toEqual([
      "bad-settings.toml:1:1: nodes.studio-1.model_dir: is required",
      "1 problem in 1 file (checked 1 settings file); its cluster definitions (2) were not checked: they are read against the settings",
      "",
    ]);
  });

  it("reports an out-of-range size in the settings at its key, alongside every other problem", async () => {
    await writeFile(
      join(dir, "huge-size.toml"),
      '[distributed]\nenabled = "maybe"\n\n[nodes.x]\nhost = "10.0.0.1"\nmodel_dir = "/m"\nmemory_limit = "9999999999999999999999999999"\n',
    );
    const run = await validate(dir, "--config", "huge-size.toml", "huge-size.toml");
    expect(run.code).toBe(1);
    expect(run.stderr.split("\n")).toEqual([
      'huge-size.toml:2:11: distributed.enabled: expected a boolean (true or false), got "maybe"',
      'huge-size.toml:7:16: nodes.x.memory_limit: "9999999999999999999999999999" is too large: a size is at most 9007199254740991 bytes (just under 8 PiB)',
      "2 problems in 1 file (checked 1 settings file); its cluster definitions (0) were not checked: they are read against the settings",
      "",
    ]);
  });

  it("refuses a registry node named local, which is the control machine's name, at its key", async () => {
    await writeFile(
      join(dir, "local-node.toml"),
      '[nodes.studio-1]\nhost = "10.0.0.1"\nmodel_dir = "/models"\n\n[nodes.local]\nhost = "10.9.9.9"\nmodel_dir = "/models"\nmemory = "64GiB"\n',
    );
    const run = await validate(dir, "--config", "local-node.toml", "clusters/llama.toml");
    expect(run.code).toBe(1);
    expect(run.stderr.split("\n")).toEqual([
      `local-node.toml:5:1: nodes.local: "local" is reserved for the control machine (the coordinator's default node, its models in [daemon] state_dir); rename this node`,
      "1 problem in 1 file (checked 1 settings file); its cluster definitions (1) were not checked: they are read against the settings",
      "",
    ]);
  });

  it("accepts the repository's own example settings and clusters", async () => {
    const copy = join(dir, "repo");
    await mkdir(copy);
    await cp(join(repoRoot, "shardctl.toml"), join(copy, "shardctl.toml"));
    await cp(join(repoRoot, "clusters"), join(copy, "clusters"), { recursive: true, filter: (src) => !src.endsWith(".status.json") });
    const run = await validate(copy, "shardctl.toml", "clusters");
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/^ok: 1 settings file, \d+ definitions?\n$/);
  });

  it("exits 1 with a usage message for a missing path, or for no path where there is no settings file", async () => {
    const missing = await validate(dir, "nope.toml");
    expect(missing).toMatchObject({ code: 1, stderr: "shardctl: nope.toml: no such file or directory\n" });
    const empty = await mkdtemp(join(tmpdir(), "shardctl-validate-none-"));
    const none = await validate(empty);
    expect(none.code).toBe(1);
    expect(none.stderr).toMatch(/^shardctl: nothing to check: no shardctl\.toml here; name the files or directories to check, or pass --config <file>/);
    await rm(empty, { recursive: true });
  });

  it("with no path: the settings file and clusters/ beside it (or --dir), as the daemon reads them", async () => {
    const copy = await mkdtemp(join(tmpdir(), "shardctl-validate-default-"));
    await cp(join(repoRoot, "shardctl.toml"), join(copy, "shardctl.toml"));
    await cp(join(repoRoot, "clusters"), join(copy, "clusters"), { recursive: true, filter: (src) => !src.endsWith(".status.json") });
    const both = await validate(copy);
    expect(both.code).toBe(0);
    expect(both.stdout).toMatch(/^ok: 1 settings file, [1-9]\d* definitions?\n$/);
    // A broken definition there is found without naming it.
    await writeFile(join(copy, "clusters", "broken.toml"), 'name = "broken"\n');
    const broken = await validate(copy);
    expect(broken.code).toBe(1);
    expect(broken.stderr).toMatch(/^clusters\/broken\.toml:\d+:\d+: /m);
    // One whose extension is not lower case is read by nothing: said, not passed over.
    await rm(join(copy, "clusters", "broken.toml"));
    await writeFile(join(copy, "clusters", "shouty.TOML"), 'nodes = ["a"]\n');
    const shouty = await validate(copy);
    expect(shouty.code).toBe(1);
    expect(shouty.stderr).toContain('clusters/shouty.TOML:1:1: not read as a cluster definition: definition files end in ".toml", lower case; rename it to shouty.toml');
    await rm(join(copy, "clusters", "shouty.TOML"));
    // One file under two names is two clusters on the same ports: the link is named.
    const [first] = (await readdir(join(copy, "clusters"))).filter((f) => f.endsWith(".toml"));
    await symlink(first!, join(copy, "clusters", "twin.toml"));
    const twin = await validate(copy);
    expect(twin.code).toBe(1);
    expect(twin.stderr).toContain(`clusters/twin.toml:1:1: a link to the same file as ${first}: every definition file is a cluster of its own`);
    expect(twin.stderr).not.toContain(`clusters/${first}:1:1: a link`);
    await rm(join(copy, "clusters", "twin.toml"));
    await writeFile(join(copy, "clusters", "broken.toml"), 'name = "broken"\n');
    // --dir names another directory; without it and without clusters/, nothing the daemon would
    // watch was found: refused as the daemon refuses it, not "ok" with no definition checked.
    const other = join(copy, "defs");
    await mkdir(other);
    await cp(join(copy, "clusters", "broken.toml"), join(other, "broken.toml"));
    await rm(join(copy, "clusters"), { recursive: true });
    expect(await validate(copy)).toEqual({
      code: 1,
      stdout: "",
      stderr: "shardctl: clusters is not a directory of cluster definitions; create it or pass --dir <directory>\n",
    });
    const dirGiven = await validate(copy, "--dir", "defs");
    expect(dirGiven.code).toBe(1);
    expect(dirGiven.stderr).toMatch(/^defs\/broken\.toml:\d+:\d+: /m);
    await rm(copy, { recursive: true });
  });
});
