/**
 * The operator guides in docs/ run as written. In each page, a fenced block whose info string is
 * `sh doctest` runs with bash (`set -e -o pipefail`), in order, and must exit 0, or N when the info
 * string says `exit=N`; a block that must fail must fail at its last command, not at a step before
 * it. Blocks meant for real Macs are plain `sh` and are not run.
 *
 * Each page gets a world of its own, as a reader rehearsing the page would have it: a temp
 * directory with a bare git repository ($REPO) and an empty clone of it (`control`, the daemon's
 * checkout, where every block starts), `shardctl` on the PATH (the built CLI), and the variables
 * the pages document: $MODEL_DIR (where the tiny test model goes), $PORT (the coordinator),
 * $ROUTER_PORT (the embedded router) and $PORT_RANGE (the transport), from free loopback ports.
 * The blocks marked `sh doctest world` in first-cluster.md then build the rest for every other page
 * (the test model, the settings with two local nodes, the router's config, the definition of
 * cluster `tiny`, its commit, the daemon started with `tiny` Ready), so the world is written down
 * once, in the page that teaches it (service.md, which needs no cluster, rehearses without it). A
 * page stops the daemon in its last block; whatever a `*.pid`
 * file in the checkout still names when the page ends is stopped here, the daemon first (SIGTERM,
 * which tears its clusters down), then any process still running from the world's directory.
 * The pages run side by side, each page's blocks in order. DOCTEST_SHOW=1 prints every block's
 * output.
 *
 * reading-a-status-file.md's example status files (its `json status-example` blocks) must validate
 * against schemas/status.schema.json, and the page must name every field the schema has; the reason
 * tables of troubleshooting.md must name only reasons that exist, and every reason of the catalogues
 * (src/errors/reasons/) that a status file can carry. Run `npm run build` first.
 */
import { spawn } from "node:child_process";
import { existsSync, readFileSync, readdirSync, readlinkSync } from "node:fs";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { describe, expect, it, type ExpectStatic } from "vitest";
import { assertValidStatus, repoRoot, shardctlJs, sleep } from "../reconciler/daemon-fixture.js";
import { freePortRun } from "../support/test-world.js";

const docsDir = join(repoRoot, "docs");
const pages = ["first-cluster.md", "ci-with-wait.md", "upgrading-a-model.md", "reading-a-status-file.md", "troubleshooting.md", "service.md"];
/** The page whose `world` blocks build every page's world. */
const worldPage = "first-cluster.md";
/** Pages that rehearse in the bare checkout, without the world's model, settings and running daemon. */
const worldless = new Set(["service.md"]);
/**
 * Deadline of one block, ms: above the pages' `wait --timeout 2m`, so a launch slowed by a loaded
 * machine ends in the wait's own words (what the status said at its deadline), not in silence.
 */
const blockDeadlineMs = 150_000;
/** Deadline of one page, its world included, ms. */
const pageDeadlineMs = 300_000;

interface Block {
  page: string;
  /** 1-based line of the opening fence. */
  line: number;
  info: string[];
  code: string;
}

/** Every fenced block of a Markdown page, with its info string split into words. */
function fencedBlocks(page: string): Block[] {
  const lines = readFileSync(join(docsDir, page), "utf8").split("\n");
  const blocks: Block[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^(`{3,}|~{3,})\s*(.*)$/.exec(lines[i]!);
    if (open === null) continue;
    const fence = open[1]!;
    const body: string[] = [];
    let j = i + 1;
    while (j < lines.length && !(lines[j]!.startsWith(fence) && lines[j]!.slice(fence.length).trim() === "")) body.push(lines[j++]!);
    if (j === lines.length) throw new Error(`${page}:${i + 1}: the fenced block is never closed`);
    blocks.push({ page, line: i + 1, info: open[2]!.trim().split(/\s+/).filter(Boolean), code: body.join("\n") + "\n" });
    i = j;
  }
  return blocks;
}

const isRunnable = (b: Block): boolean => (b.info[0] === "sh" || b.info[0] === "bash") && b.info.includes("doctest");
const isWorld = (b: Block): boolean => isRunnable(b) && b.info.includes("world");

function expectedExit(block: Block): number {
  const flag = block.info.find((w) => w.startsWith("exit="));
  return flag === undefined ? 0 : Number(flag.slice("exit=".length));
}

interface World {
  root: string;
  /** The daemon's checkout, where every block starts. */
  control: string;
  env: NodeJS.ProcessEnv;
}

async function createWorld(page: string): Promise<World> {
  const root = await mkdtemp(join(tmpdir(), `shardctl-docs-${basename(page, ".md")}-`));
  const bin = join(root, "bin");
  await mkdir(bin);
  // mktemp in a block makes its directory in the world, which goes with it.
  await mkdir(join(root, "tmp"));
  await writeFile(join(bin, "shardctl"), `#!/bin/sh\nexec ${JSON.stringify(process.execPath)} ${JSON.stringify(shardctlJs)} "$@"\n`, { mode: 0o755 });
  // Every port the page uses from one run below the kernel's ephemeral range: a port handed out
  // as ephemeral could be an outgoing connection's by the time the page's daemon binds it, minutes on.
  const first = await freePortRun(["127.0.0.1"], 14);
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    PATH: `${bin}:${process.env.PATH ?? "/usr/bin:/bin"}`,
    TMPDIR: join(root, "tmp"),
    MODEL_DIR: join(root, "models", "tiny"),
    REPO: join(root, "origin.git"),
    PORT: String(first + 12),
    ROUTER_PORT: String(first + 13),
    PORT_RANGE: `${first}-${first + 11}`,
    GIT_AUTHOR_NAME: "doctest",
    GIT_AUTHOR_EMAIL: "doctest@example.invalid",
    GIT_COMMITTER_NAME: "doctest",
    GIT_COMMITTER_EMAIL: "doctest@example.invalid",
    // Output for a log, not a terminal; the level the pages show.
    NO_COLOR: "1",
    SHARDCTL_LOG_LEVEL: "info",
  };
  const world = { root, control: join(root, "control"), env };
  // The reader's prelude (first-cluster.md shows it): a bare repository and an empty clone of it.
  const prelude = await runBash(world, root, 'git init -q --bare origin.git && git clone -q "$REPO" control 2> /dev/null', 30_000);
  if (prelude.code !== 0) throw new Error(`cannot make the world's repositories: ${prelude.output}`);
  return world;
}

interface BashResult {
  code: number | null;
  output: string;
  timedOut: boolean;
}

/** Run a script with bash in `cwd`; on the deadline, kill its process group. */
function runBash(world: World, cwd: string, script: string, deadlineMs: number): Promise<BashResult> {
  return new Promise((done) => {
    const child = spawn("bash", ["-e", "-o", "pipefail", "-c", script], { cwd, env: world.env, stdio: ["ignore", "pipe", "pipe"], detached: true });
    let output = "";
    let timedOut = false;
    child.stdout.on("data", (d: Buffer) => (output += d.toString()));
    child.stderr.on("data", (d: Buffer) => (output += d.toString()));
    const timer = setTimeout(() => {
      timedOut = true;
      try {
        process.kill(-child.pid!, "SIGKILL");
      } catch {
        // already gone
      }
    }, deadlineMs);
    // "exit", not "close": a block may leave a process running in the background on purpose.
    child.once("exit", (code) => {
      clearTimeout(timer);
      // Let the pipes drain what the block itself printed.
      setTimeout(() => done({ code, output, timedOut }), 50);
    });
  });
}

/**
 * Run a block where a reader would: in the daemon's checkout. Under `set -e` the first command that
 * fails ends the block, and an ERR trap records its line, so a block that must exit N is only
 * satisfied by its last command failing (not by a step before it that broke).
 */
async function runBlock(world: World, block: Block, expect: ExpectStatic): Promise<void> {
  const started = Date.now();
  const failedAt = join(world.root, "failed-at");
  await rm(failedAt, { force: true });
  // One line, so the block's own lines keep their numbers (LINENO - 1).
  const trap = `trap 'echo $((LINENO - 1)) > ${JSON.stringify(failedAt)}' ERR\n`;
  const result = await runBash(world, world.control, trap + block.code, blockDeadlineMs);
  const expected = expectedExit(block);
  const what = `${block.page}:${block.line} (${((Date.now() - started) / 1000).toFixed(1)} s)${result.timedOut ? `, killed after ${blockDeadlineMs / 1000} s` : ""}`;
  if (process.env.DOCTEST_SHOW === "1") console.log(`--- ${what}: exit ${result.code}\n${result.output}`);
  // A daemon the page started logs to daemon.log: its last words say why a wait found none watching.
  const daemonLog = join(world.control, "daemon.log");
  const daemonWords = existsSync(daemonLog) ? `--- daemon.log (end)\n${readFileSync(daemonLog, "utf8").slice(-3000)}` : "";
  const context = `\n--- block\n${block.code}--- output\n${result.output.slice(-6000)}${daemonWords}`;
  expect(result.code, `${what} exited ${result.code}, expected ${expected}${context}`).toBe(expected);
  if (expected !== 0) {
    const lines = block.code.split("\n");
    const last = lines.findLastIndex((l) => l.trim() !== "" && !l.trim().startsWith("#")) + 1;
    const line = existsSync(failedAt) ? Number(readFileSync(failedAt, "utf8").trim()) : undefined;
    expect(line, `${what}: the command on line ${line} of the block failed; only its last command (line ${last}) may${context}`).toBe(last);
  }
}

/** Stop what the page left running: the processes its `*.pid` files name, then anything started in the world. */
async function stopLeftovers(world: World): Promise<void> {
  const ours = (pid: number): boolean => {
    try {
      const inWorld = `${world.root}/`;
      return `${readlinkSync(`/proc/${pid}/cwd`)}/`.startsWith(inWorld) || readFileSync(`/proc/${pid}/cmdline`, "utf8").includes(inWorld);
    } catch {
      return false;
    }
  };
  const pidFiles = existsSync(world.control) ? readdirSync(world.control).filter((f) => f.endsWith(".pid")) : [];
  // The daemon first: it tears its clusters down (--teardown-on-exit) on SIGTERM.
  pidFiles.sort((a, b) => Number(b === "daemon.pid") - Number(a === "daemon.pid"));
  for (const file of pidFiles) {
    const pid = Number(readFileSync(join(world.control, file), "utf8").trim());
    if (!Number.isInteger(pid) || pid <= 0 || !ours(pid)) continue;
    process.kill(pid, "SIGTERM");
    for (let i = 0; i < 150 && ours(pid); i++) await sleep(100);
  }
  for (const entry of readdirSync("/proc").filter((e) => /^\d+$/.test(e))) {
    const pid = Number(entry);
    if (pid !== process.pid && ours(pid)) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        // gone meanwhile
      }
    }
  }
}

const worldBlocks = fencedBlocks(worldPage).filter(isWorld);

// The pages run side by side, each in its own world (most of a page's time is spent waiting for
// processes), and each page's blocks in order. However a page ends, what it started is stopped.
describe.concurrent("the runnable blocks of docs/", () => {
  for (const page of pages) {
    const blocks = fencedBlocks(page).filter(isRunnable);
    // The world page runs its world blocks in their place; the others after them.
    const own = page === worldPage ? blocks : blocks.filter((b) => !isWorld(b));

    it(`${page} has runnable blocks, each page one that runs shardctl`, () => {
      expect(own.length, `${page} has no \`sh doctest\` block`).toBeGreaterThan(0);
      expect(own.some((b) => /\bshardctl\b/.test(b.code))).toBe(true);
    });

    it(
      `${page}: every runnable block exits as it says`,
      // Concurrent tests assert with their own `expect`, so that a failure is reported on its page.
      async ({ expect }) => {
        const world = await createWorld(page);
        try {
          if (page !== worldPage && !worldless.has(page)) for (const block of worldBlocks) await runBlock(world, block, expect);
          for (const block of own) await runBlock(world, block, expect);
        } finally {
          await stopLeftovers(world);
          await rm(world.root, { recursive: true, force: true });
        }
      },
      pageDeadlineMs,
    );
  }
});

describe("reading-a-status-file.md: the example and the fields", () => {
  const page = "reading-a-status-file.md";
  const text = readFileSync(join(docsDir, page), "utf8");
  const schema = JSON.parse(readFileSync(join(repoRoot, "schemas/status.schema.json"), "utf8")) as { properties: Record<string, unknown> };

  it("shows a status file that validates against schemas/status.schema.json", () => {
    const examples = fencedBlocks(page).filter((b) => b.info[0] === "json" && b.info.includes("status-example"));
    expect(examples.length).toBeGreaterThan(0);
    for (const example of examples) assertValidStatus(JSON.parse(example.code), `${page}:${example.line}`);
  });

  it("names every field of the status file", () => {
    const fields = collectFields(schema);
    const missing = fields.filter((f) => !text.includes(`\`${f}\``));
    expect(missing, `fields of schemas/status.schema.json that ${page} never names in backticks`).toEqual([]);
  });
});

describe("troubleshooting.md: the reason tables", () => {
  const text = readFileSync(join(docsDir, "troubleshooting.md"), "utf8");
  const catalogue = catalogueReasons();
  // Rows of the reason tables: | `Reason` | … |
  const tabled = [...text.matchAll(/^\| `([A-Z][A-Za-z0-9]*)`/gm)].map((m) => m[1]!);

  it("lists only reasons that exist", () => {
    const known = new Set([...catalogue.values()].flat());
    expect(tabled.filter((r) => !known.has(r))).toEqual([]);
  });

  it("lists every reason: those a status file can carry, and the dashboard's and the service command's answers", () => {
    const shown = new Set(tabled);
    const missing = [...catalogue].flatMap(([file, reasons]) => reasons.filter((r) => !shown.has(r)).map((r) => `${r} (${file})`));
    expect(missing, "reasons of src/errors/reasons/ with no row in docs/troubleshooting.md").toEqual([]);
  });
});

/** The reasons each catalogue file of src/errors/reasons/ declares: its string literals. */
function catalogueReasons(): Map<string, string[]> {
  const dir = join(repoRoot, "src/errors/reasons");
  const catalogue = new Map<string, string[]>();
  for (const file of readdirSync(dir).filter((f) => f.endsWith(".ts") && f !== "index.ts")) {
    const source = readFileSync(join(dir, file), "utf8").replace(/\/\*[\s\S]*?\*\//g, "");
    catalogue.set(
      file,
      [...source.matchAll(/\|\s*"([A-Z][A-Za-z0-9]*)"/g)].map((m) => m[1]!),
    );
  }
  return catalogue;
}

/** Every property name a JSON Schema declares, at any depth. */
function collectFields(node: unknown, into = new Set<string>()): string[] {
  if (Array.isArray(node)) for (const item of node) collectFields(item, into);
  else if (typeof node === "object" && node !== null) {
    const record = node as Record<string, unknown>;
    if (typeof record.properties === "object" && record.properties !== null) for (const key of Object.keys(record.properties)) into.add(key);
    for (const value of Object.values(record)) collectFields(value, into);
  }
  return [...into];
}
