/**
 * shardctl as a package: `npm pack` of this repository, installed with `npm install -g` into a temp
 * prefix, then its `shardctl` and `shard-engine` run from that prefix's bin/ (far from the
 * repository, so nothing resolves back into it). The install takes its dependencies from the npm
 * cache that `npm ci` filled (`--offline`), and only reaches for the registry when the cache lacks one.
 * Also `npx shardctl` from the repository.
 */
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { delimiter, dirname, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { allocateHost, freePort } from "../support/test-world.js";
import { repoRoot, requireBuild, runFile, type Run } from "./support/run-shardctl.js";

const manifest = JSON.parse(await readFile(join(repoRoot, "package.json"), "utf8")) as { version: string; bin: Record<string, string>; files: string[] };
// The installed bins find node on the PATH (`#!/usr/bin/env node`; shard-engine's shell line execs
// `node`): this node first.
const env = { ...process.env, PATH: `${dirname(process.execPath)}${delimiter}${process.env.PATH ?? ""}`, npm_config_update_notifier: "false", npm_config_fund: "false" };

let root: string;
let prefix: string;
let packed: Array<{ path: string }>;

beforeAll(async () => {
  requireBuild();
  root = await mkdtemp(join(tmpdir(), "shardctl-package-"));
  prefix = join(root, "prefix");
  // --ignore-scripts: prepack would rebuild dist/ while other test files run from it; `npm test`
  // has just built it.
  const pack = await runFile("npm", ["pack", "--ignore-scripts", "--json", "--pack-destination", root], { cwd: repoRoot, env, timeoutMs: 120_000 });
  expect(pack.code, pack.stderr).toBe(0);
  const [result] = JSON.parse(pack.stdout) as Array<{ filename: string; files: Array<{ path: string }> }>;
  packed = result!.files;
  const tarball = join(root, result!.filename);
  const install = (cacheMode: string): Promise<Run> =>
    runFile("npm", ["install", "--global", "--prefix", prefix, cacheMode, "--no-audit", "--no-fund", tarball], { cwd: root, env, timeoutMs: 300_000 });
  let installed = await install("--offline");
  // ENOTCACHED: a dependency is not in the cache (a cache other than the one `npm ci` used).
  if (installed.code !== 0 && installed.stderr.includes("ENOTCACHED")) installed = await install("--prefer-offline");
  expect(installed.code, installed.stderr).toBe(0);
}, 600_000);

afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

describe("the packed package", () => {
  it("holds the built programs, every built folder `files` names, the schemas and the README, and no sources or tests", () => {
    const paths = packed.map((file) => file.path);
    for (const bin of Object.values(manifest.bin)) expect(paths).toContain(bin);
    for (const file of ["package.json", "README.md", "schemas/cluster.schema.json", "schemas/settings.schema.json", "schemas/status.schema.json"])
      expect(paths).toContain(file);
    // What the build made is packed (dist/ui, say, is read at run time by the daemon's dashboard)...
    for (const entry of manifest.files.filter((entry) => existsSync(join(repoRoot, entry))))
      expect(
        paths.some((path) => path.startsWith(`${entry}/`)),
        entry,
      ).toBe(true);
    // ...and nothing else: no sources, tests or benches.
    const listed = (path: string): boolean => manifest.files.some((entry) => path === entry || path.startsWith(`${entry}/`));
    expect(paths.filter((path) => !listed(path) && !["package.json", "README.md", "LICENSE"].includes(path))).toEqual([]);
    expect(paths.filter((path) => path.endsWith(".ts") && !path.endsWith(".d.ts"))).toEqual([]);
  });

  it("installs a shardctl that reports its version, its help and its completion", async () => {
    const shardctl = join(prefix, "bin", "shardctl");
    expect(await runFile(shardctl, ["--version"], { cwd: root, env })).toEqual({ code: 0, stdout: `shardctl ${manifest.version}\n`, stderr: "" });
    const help = await runFile(shardctl, ["help", "validate"], { cwd: root, env });
    expect(help).toMatchObject({ code: 0, stderr: "" });
    expect(help.stdout).toContain("usage: shardctl validate");
    const completion = await runFile(shardctl, ["completion", "bash"], { cwd: root, env });
    expect(completion).toMatchObject({ code: 0, stderr: "" });
    expect(completion.stdout).toContain("complete -F _shardctl shardctl");
  });

  it("installs a shardctl that validates definitions: exit 0 when valid, 1 with file:line:col when not", async () => {
    const shardctl = join(prefix, "bin", "shardctl");
    const work = join(root, "work");
    await mkdir(join(work, "clusters"), { recursive: true });
    await writeFile(
      join(work, "shardctl.toml"),
      '[nodes.studio-1]\nhost = "10.0.0.1"\nmodel_dir = "/models"\n\n[nodes.studio-2]\nhost = "10.0.0.2"\nmodel_dir = "/models"\n',
    );
    await writeFile(join(work, "clusters", "llama.toml"), 'nodes = ["studio-1", "studio-2"]\n\n[model]\nid = "org/llama"\n');
    const valid = await runFile(shardctl, ["validate", "clusters"], { cwd: work, env });
    expect(valid).toMatchObject({ code: 0, stderr: "" });
    expect(valid.stdout).toMatch(/^ok: /);

    await writeFile(join(work, "clusters", "broken.toml"), 'nodes = ["studio-1", "studio-3"]\n\n[model]\nid = "org/broken"\n');
    const invalid = await runFile(shardctl, ["validate", "clusters"], { cwd: work, env });
    expect(invalid.code).toBe(1);
    expect(invalid.stderr).toMatch(/^clusters\/broken\.toml:1:\d+: nodes/m);
  });

  it("installs a shard-engine that reports its version and help, and serves a model made by the installed shardctl", async () => {
    const engine = join(prefix, "bin", "shard-engine");
    const version = await runFile(engine, ["--version"], { cwd: root, env });
    expect(version).toMatchObject({ code: 0, stderr: "" });
    expect(version.stdout).toMatch(/^shard-engine \d+\.\d+\.\d+\n$/);
    const help = await runFile(engine, ["--help"], { cwd: root, env });
    expect(help).toMatchObject({ code: 0, stderr: "" });
    expect(help.stdout).toContain("--distributed-config");

    // Everything the engine loads at run time (its kernels, the tokenizer code) must be in the package.
    const model = join(root, "model");
    expect(await runFile(join(prefix, "bin", "shardctl"), ["make-test-model", model, "--layers", "2"], { cwd: root, env })).toMatchObject({ code: 0, stderr: "" });
    const host = await allocateHost();
    const port = await freePort(host);
    const child = spawn(engine, ["-m", model, "--host", host, "--port", String(port)], { cwd: root, env, stdio: ["ignore", "ignore", "pipe"] });
    let stderr = "";
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    try {
      const url = `http://${host}:${port}`;
      const deadline = Date.now() + 60_000;
      while ((await statusOf(`${url}/health`)) !== 200) {
        if (child.exitCode !== null || Date.now() > deadline) throw new Error(`the installed shard-engine did not become healthy (exit ${child.exitCode}): ${stderr}`);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      const response = await fetch(`${url}/v1/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        // Greedy: a sampled end-of-text first token (random weights) would make the count 0 now and then.
        body: JSON.stringify({ prompt: "Hello", max_tokens: 3, temperature: 0 }),
      });
      expect(response.status, stderr).toBe(200);
      const body = (await response.json()) as { usage: { completion_tokens: number } };
      expect(body.usage.completion_tokens).toBeGreaterThan(0);
    } finally {
      child.kill("SIGKILL");
    }
  }, 120_000);
});

describe("npx shardctl", () => {
  it("runs the built shardctl from the repository", async () => {
    // A checkout says its commit too (the installed package above, no checkout, does not).
    const commit = (await runFile("git", ["rev-parse", "HEAD"], { cwd: repoRoot, env })).stdout.trim();
    expect(await runFile("npx", ["--no-install", "shardctl", "--version"], { cwd: repoRoot, env, timeoutMs: 60_000 })).toEqual({
      code: 0,
      stdout: `shardctl ${manifest.version} (commit ${commit.slice(0, 12)})\n`,
      stderr: "",
    });
  });
});

/** The HTTP status of a GET, or 0 while nothing accepts the connection. */
function statusOf(url: string): Promise<number> {
  return fetch(url).then(
    async (response) => {
      await response.body?.cancel();
      return response.status;
    },
    () => 0,
  );
}
