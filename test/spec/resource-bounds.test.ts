/**
 * Definitions and settings that are not files to read, or that are built to exhaust the reader:
 * FIFOs (mkfifo), directories, files over the size caps, a 200,000-entry `nodes` array, keys nested
 * 100,000 deep. Each must be one located issue, quickly — never a hang or a stack overflow. The CLI
 * tests run the built `shardctl` (run `npm run build` first) with a deadline.
 */
import { execFile, execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isShardctlError } from "../../src/errors/index.js";
import { loadCluster, loadSettings, parseCluster, parseSettings, SpecError, tomlBounds, type Settings, type SpecIssue } from "../../src/spec/index.js";

const cli = fileURLToPath(new URL("../../dist/src/cli/shardctl.js", import.meta.url));
const settingsText = `[nodes.a]\nhost = "local"\nmodel_dir = "/tmp/m"\nmemory = "8GiB"\n\n[nodes.b]\nhost = "local"\nmodel_dir = "/tmp/m"\nmemory = "8GiB"\n`;
const validDefinition = 'nodes = ["a", "b"]\n\n[model]\nid = "org/m"\n';

let dir: string;
let settings: Settings;

beforeAll(async () => {
  if (!existsSync(cli)) throw new Error(`${cli} is missing: run \`npm run build\` first`);
  dir = await mkdtemp(join(tmpdir(), "shardctl-spec-bounds-"));
  await writeFile(join(dir, "shardctl.toml"), settingsText);
  const parsed = parseSettings(settingsText, join(dir, "shardctl.toml"));
  if (!parsed.ok) throw new Error(JSON.stringify(parsed.issues));
  settings = parsed.value;
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

function mkfifo(name: string): string {
  const path = join(dir, name);
  execFileSync("mkfifo", [path]);
  return path;
}

/** `fn()` must settle within `deadlineMs`; returns what it resolved to or threw. */
async function within<T>(deadlineMs: number, fn: () => Promise<T> | T): Promise<T | unknown> {
  let timer: NodeJS.Timeout | undefined;
  const hung = new Promise<never>((_, fail) => (timer = setTimeout(() => fail(new Error(`no answer within ${deadlineMs} ms`)), deadlineMs)));
  try {
    return await Promise.race([
      Promise.resolve()
        .then(fn)
        .catch((error: unknown) => error),
      hung,
    ]);
  } finally {
    clearTimeout(timer);
  }
}

function onlyIssue(result: unknown): SpecIssue {
  const parsed = result as { ok: boolean; issues: SpecIssue[] };
  expect(parsed.ok).toBe(false);
  expect(parsed.issues).toHaveLength(1);
  return parsed.issues[0]!;
}

describe("special files", () => {
  it("a definition that is a FIFO is one issue at 1:1, at once", async () => {
    const file = mkfifo("pipe.toml");
    const issue = onlyIssue(await within(2000, () => loadCluster(file, settings)));
    expect(issue).toEqual({
      file,
      line: 1,
      col: 1,
      path: "",
      message: "the cluster definition is a FIFO (named pipe), not a regular file; only regular files are read — replace it with the file itself",
    });
  });

  it("a definition that is a directory is one issue at 1:1", async () => {
    const file = join(dir, "folder.toml");
    await mkdir(file);
    expect(onlyIssue(await within(2000, () => loadCluster(file, settings))).message).toContain("is a directory, not a regular file");
  });

  it("settings that are a FIFO: a SpecError NotRegularFile at file:1:1, at once", async () => {
    const file = mkfifo("settings-pipe.toml");
    const error = await within(2000, () => loadSettings(file));
    expect(error).toBeInstanceOf(SpecError);
    expect(isShardctlError(error, "NotRegularFile")).toBe(true);
    expect((error as Error).message).toBe(
      `${file}:1:1: the settings file is a FIFO (named pipe), not a regular file; only regular files are read — replace it with the file itself`,
    );
  });

  it("a definition over the 1 MiB cap is refused unread; the same text handed to parseCluster too", async () => {
    const file = join(dir, "huge.toml");
    const text = `${validDefinition}# ${"x".repeat(1024 * 1024)}\n`;
    await writeFile(file, text);
    const loaded = onlyIssue(await loadCluster(file, settings));
    expect(loaded).toMatchObject({ line: 1, col: 1, path: "" });
    expect(loaded.message).toMatch(/^the cluster definition is \d+ bytes, over the cap of 1048576 bytes \(1 MiB\)/);
    expect(onlyIssue(parseCluster(text, file, settings)).message).toMatch(/over the cap of 1048576 bytes \(1 MiB\)/);
  });

  it("settings over the 4 MiB cap are refused unread", async () => {
    const file = join(dir, "huge-settings.toml");
    await writeFile(file, `${settingsText}# ${"x".repeat(4 * 1024 * 1024)}\n`);
    const error = await loadSettings(file).catch((e: unknown) => e);
    expect(isShardctlError(error, "FileTooLarge")).toBe(true);
    expect((error as Error).message).toMatch(/:1:1: the settings file is \d+ bytes, over the cap of 4194304 bytes \(4 MiB\)/);
  });
});

describe("huge and deep TOML values", () => {
  it("a 200,000-entry nodes array: one issue at the nodes key, quickly, no stack overflow", async () => {
    const text = `# many nodes\nnodes = [${Array.from({ length: 200_000 }, () => '"a"').join(", ")}]\n\n[model]\nid = "org/m"\n`;
    const started = Date.now();
    const issue = onlyIssue(await within(5000, () => parseCluster(text, join(dir, "many.toml"), settings)));
    expect(Date.now() - started).toBeLessThan(5000);
    expect(issue).toMatchObject({ line: 2, col: 1, path: "nodes" });
    expect(issue.message).toBe(`has 200000 elements; at most ${tomlBounds.maxArrayLength} are accepted — shorten the list`);
  });

  it("dotted keys 100,000 deep (smol-toml does not limit those): one issue, quickly", async () => {
    const text = `# deep\n${Array.from({ length: 100_000 }, () => "k").join(".")} = 1\n${validDefinition}`;
    const issue = onlyIssue(await within(5000, () => parseCluster(text, join(dir, "dotted.toml"), settings)));
    expect(issue).toMatchObject({ line: 2, col: 1 });
    expect(issue.path).toBe(Array.from({ length: tomlBounds.maxDepth }, () => "k").join("."));
    expect(issue.message).toContain(`nests deeper than ${tomlBounds.maxDepth} levels`);
  });

  it("a table header 50,000 keys deep: one issue at the header", async () => {
    const text = `${validDefinition}\n[${Array.from({ length: 50_000 }, () => "t").join(".")}]\nx = 1\n`;
    const issue = onlyIssue(await within(5000, () => parseCluster(text, join(dir, "header.toml"), settings)));
    expect(issue).toMatchObject({ line: 6, col: 2 });
    expect(issue.message).toContain("nests deeper than");
  });

  it("inline arrays nested 999 deep (within smol-toml's own limit): one issue at the key", async () => {
    const text = `extra = ${"[".repeat(999)}${"]".repeat(999)}\n${validDefinition}`;
    const issue = onlyIssue(await within(5000, () => parseCluster(text, join(dir, "arrays.toml"), settings)));
    expect(issue).toMatchObject({ line: 1, col: 1 });
    expect(issue.path.startsWith("extra[0][0]")).toBe(true);
  });

  it("settings registering 5,000 nodes: one issue at the first [nodes.…] header", async () => {
    const text = `[daemon]\nresync_seconds = 30\n\n${Array.from({ length: 5000 }, (_, i) => `[nodes.n${i}]\nhost = "local"\nmodel_dir = "/m"\n`).join("\n")}`;
    const issue = onlyIssue(await within(5000, () => parseSettings(text, join(dir, "wide.toml"))));
    expect(issue).toMatchObject({ line: 4, col: 2, path: "nodes" });
    expect(issue.message).toBe(`has 5000 keys; at most ${tomlBounds.maxTableKeys} are accepted in one table — split or shorten it`);
  });

  it("a definition within the bounds still parses", () => {
    expect(parseCluster(validDefinition, join(dir, "fine.toml"), settings).ok).toBe(true);
  });
});

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
  ms: number;
}

/** The built CLI in `dir`, killed after 20 s (a hang fails the test instead of stalling the run). */
function shardctl(...args: string[]): Promise<Run> {
  const started = Date.now();
  return new Promise((resolve) => {
    execFile(process.execPath, [cli, ...args], { cwd: dir, timeout: 20_000 }, (error, stdout, stderr) => {
      const code = error === null ? 0 : typeof error.code === "number" ? error.code : null;
      resolve({ code, stdout, stderr, ms: Date.now() - started });
    });
  });
}

describe("the CLI answers at once", () => {
  it("shardctl validate <a FIFO definition>: exit 1 with file:1:1 and what it is", async () => {
    mkfifo("cli-pipe.toml");
    const run = await shardctl("validate", "cli-pipe.toml");
    expect(run.code, run.stderr).toBe(1);
    expect(run.ms).toBeLessThan(10_000);
    expect(run.stderr).toContain("cli-pipe.toml:1:1: the cluster definition is a FIFO (named pipe), not a regular file");
  });

  it("shardctl validate <a 200,000-node definition>: exit 1 with the located issue, no stack trace", async () => {
    await writeFile(join(dir, "cli-many.toml"), `nodes = [${Array.from({ length: 200_000 }, () => '"a"').join(",")}]\n[model]\nid = "org/m"\n`);
    const run = await shardctl("validate", "cli-many.toml");
    expect(run.code, run.stderr).toBe(1);
    expect(run.stderr).toContain(`cli-many.toml:1:1: nodes: has 200000 elements; at most ${tomlBounds.maxArrayLength} are accepted`);
    expect(run.stderr).not.toContain("RangeError");
  });

  it("shardctl plan with settings that are a FIFO: exit 1 with file:1:1, at once", async () => {
    const settingsPipe = mkfifo("cli-settings-pipe.toml");
    await writeFile(join(dir, "plain.toml"), validDefinition);
    const run = await shardctl("plan", "plain.toml", "--config", settingsPipe);
    expect(run.code, run.stderr).toBe(1);
    expect(run.ms).toBeLessThan(10_000);
    expect(run.stderr).toContain(`${settingsPipe}:1:1: the settings file is a FIFO (named pipe)`);
  });
});
