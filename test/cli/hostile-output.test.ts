/**
 * Text someone else wrote reaches people's terminals: definition file names and keys (a git
 * checkout is anyone's), an engine's own output quoted in a status, a daemon log line. None of it
 * may carry a raw control character (ESC starts terminal sequences: retitle, clear, rewrite) or a
 * bidi override to the terminal: `shardctl validate` and `shardctl status` as real processes, and
 * the daemon's human log line.
 */
import { chmod, mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { formatLogLine } from "../../src/cli/pretty-log.js";
import { Ledger } from "../../src/launch/index.js";
import type { Daemon } from "../../src/reconciler/index.js";
import {
  definitionText,
  freePort,
  freePortRange,
  readStatusFile,
  runShardctl,
  startInProcessDaemon,
  startWorld,
  waitForStatus,
  writeDefinition,
  writeSettings,
  type DaemonWorld,
} from "../reconciler/daemon-fixture.js";
import { layoutHeader, llamaConfig, llamaLayer, writeConfig, writeRawSafetensors } from "../planner/fixtures.js";
import { requireBuild, shardctl } from "./support/run-shardctl.js";

/** Every character a terminal acts on or reorders by, but the newline and the tab. */
// eslint-disable-next-line no-control-regex -- matching control characters is the point
const raw = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/;
/** What a hostile string holds: a window title, a screen clear, C1's CSI, a right-to-left override. */
const hostile = "\u001b]0;pwned\u0007\u001b[2J\u009b31m\u202eevil";

describe("shardctl validate", () => {
  let dir: string;
  beforeAll(async () => {
    requireBuild();
    dir = await mkdtemp(join(tmpdir(), "shardctl-hostile-output-"));
    await writeFile(join(dir, "shardctl.toml"), '[nodes.n1]\nhost = "10.0.0.1"\nmodel_dir = "/models"\n');
    await mkdir(join(dir, "clusters"));
    // A file name that is a terminal sequence, and a definition whose key and value are (TOML \u escapes).
    await writeFile(join(dir, "clusters", `${hostile}.toml`), 'nodes = ["n1"]\n[model]\nid = "org/name"\n');
    await writeFile(join(dir, "clusters", "keys.toml"), 'nodes = ["n1"]\n"\\u001b[31mkey\\u202e" = 1\n[model]\nid = "\\u009b31m\\u202eorg/name"\n');
  });
  afterAll(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  test("names the file, the place and the problem with every control character escaped", async () => {
    const r = await shardctl(["validate", "--config", join(dir, "shardctl.toml"), join(dir, "clusters")], { cwd: dir });
    expect(r.code).toBe(1);
    expect(r.stdout + r.stderr).not.toMatch(raw);
    expect(r.stderr).toContain("\\u001b]0;pwned\\u0007\\u001b[2J\\u009b31m\\u202eevil.toml:1:1: file name");
    expect(r.stderr).toMatch(/keys\.toml:2:1: "\\u001b\[31mkey\\u202e": unknown key/);
    expect(r.stderr).toMatch(/keys\.toml:4:6: model\.id: "\\u009b31m\\u202eorg\/name" is not allowed/);
  });
});

describe("shardctl status", () => {
  let world: DaemonWorld;
  let daemon: Daemon;
  beforeAll(async () => {
    world = await startWorld();
    await writeSettings(world, { enabled: true });
    // An engine whose own output is terminal sequences: the daemon quotes it in the status.
    const engine = join(world.root, "hostile-engine.sh");
    await writeFile(engine, `#!/bin/sh\nprintf '%s\\n' '${hostile}' >&2\nexit 3\n`);
    await chmod(engine, 0o755);
    daemon = await startInProcessDaemon(world);
    const port = await freePort();
    await writeDefinition(world, "noisy", definitionText(world, { nodes: ["l1"], port, portRange: await freePortRange(["127.0.0.1"]), binary: engine }));
    await waitForStatus(world, "noisy", (s) => s.lastError?.message.includes("pwned") === true, 60_000);
  }, 120_000);
  afterAll(async () => {
    if (daemon !== undefined) {
      await writeDefinition(world, "noisy", definitionText(world, { nodes: ["l1"], desired: "stopped" }));
      await daemon.stop();
    }
    await world?.close();
  });

  test("quotes an engine's output without letting its sequences reach the terminal", async () => {
    const detail = await runShardctl(world, ["status", "noisy"]);
    expect(detail.stdout).toContain("pwned");
    expect(detail.stdout).toContain("\\u001b]0;pwned\\u0007");
    expect(detail.stdout + detail.stderr).not.toMatch(raw);
    const list = await runShardctl(world, ["status"]);
    expect(list.stdout + list.stderr).not.toMatch(raw);
    // A failing cluster's row says why: its last error's reason beside its health.
    const { lastError } = (await readStatusFile(world, "noisy"))!;
    expect(list.stdout).toMatch(new RegExp(`^noisy\\s+\\[cluster\\]\\s+(Progressing|Stalled) \\(${lastError!.reason}\\)\\s`, "m"));
  });

  test("--json: the same document, its C1 and bidi characters escaped (JSON.stringify leaves them raw)", async () => {
    for (const args of [
      ["status", "noisy", "--json"],
      ["status", "--json"],
    ]) {
      const r = await runShardctl(world, args);
      expect(r.stdout + r.stderr).not.toMatch(raw);
      const parsed = JSON.parse(r.stdout) as { lastError?: { message: string } } | Array<{ lastError?: { message: string } }>;
      const status = Array.isArray(parsed) ? parsed[0]! : parsed;
      expect(status.lastError?.message).toContain(hostile);
    }
  });

  test("the list keeps a definition whose file name holds a newline on one row, the newline escaped (no row can be forged)", async () => {
    const file = join(world.clustersDir, "nl\nforged  [cluster]  Healthy.toml");
    await writeFile(file, 'nodes = ["l1"]\n[model]\nid = "org/name"\n');
    try {
      const list = await runShardctl(world, ["status"]);
      const rows = list.stdout.split("\n");
      expect(rows.filter((r) => r.startsWith("nl\\u000aforged  [cluster]  Healthy"))).toHaveLength(1);
      expect(rows.filter((r) => r.startsWith("forged"))).toEqual([]);
    } finally {
      await rm(file, { force: true });
    }
  });

  test("`wait` says the same words, escaped the same way, when it gives up", async () => {
    const waited = await runShardctl(world, ["wait", "noisy", "--for", "condition=Ready", "--timeout", "2s"]);
    expect(waited.code).toBe(1);
    expect(waited.stdout + waited.stderr).toContain("\\u001b]0;pwned\\u0007");
    expect(waited.stdout + waited.stderr).not.toMatch(raw);
  });
});

describe("a model whose tensor name forges status lines", () => {
  /** A tensor name made of the lines `shardctl status` prints, a carriage return and a window title. */
  const forged = "w\n\ncoordinator on n1: 127.0.0.1:8080 health ok\nCONDITION  STATUS  REASON\nReady  True  ClusterReady\r\u001b]0;pwned\u0007";
  /** How the refusal quotes it: one JSON string, its line breaks and controls escapes. */
  const quoted =
    'tensor "w\\n\\ncoordinator on n1: 127.0.0.1:8080 health ok\\nCONDITION  STATUS  REASON\\nReady  True  ClusterReady\\r\\u001b]0;pwned\\u0007" has no dtype';
  /** A line of output that only the forged name could have made (status's own columns are wider). */
  const forgedLine = /^(coordinator on n1|CONDITION {2}STATUS|Ready {2}True)/m;
  let world: DaemonWorld;
  let daemon: Daemon | undefined;
  beforeAll(async () => {
    requireBuild();
    world = await startWorld();
    await writeSettings(world, { enabled: true });
    const model = join(world.root, "models", "forged");
    await mkdir(model, { recursive: true });
    await writeConfig(model, llamaConfig());
    const { header, dataBytes } = layoutHeader([
      ["model.embed_tokens.weight", "F16", [16, 8]],
      ...llamaLayer(0),
      ...llamaLayer(1),
      ["model.norm.weight", "F16", [8]],
      ["lm_head.weight", "F16", [16, 8]],
    ]);
    // An entry with no dtype: the header is refused, and the refusal names the tensor.
    await writeRawSafetensors(join(model, "model.safetensors"), { ...header, [forged]: { shape: [0], data_offsets: [0, 0] } }, dataBytes);
    await writeDefinition(world, "forged", definitionText(world, { nodes: ["l1", "l2"], modelId: model }));
  });
  afterAll(async () => {
    await daemon?.stop();
    await world?.close();
  });

  test("`diff` says the daemon will not act, the name quoted on the one line, nothing raw", async () => {
    const r = await runShardctl(world, ["diff", "forged"]);
    expect(r.stdout + r.stderr).not.toMatch(raw);
    expect(r.stdout).not.toMatch(forgedLine);
    const line = r.stdout.split("\n").find((l) => l.startsWith("! forged: the daemon will not act: SafetensorsHeaderInvalid: "));
    expect(line).toContain(quoted);
  });

  test("`plan` shows the same refusal on one line, in text and JSON", async () => {
    const text = await runShardctl(world, ["plan", "forged"]);
    expect(text.code).toBe(1);
    expect(text.stdout + text.stderr).not.toMatch(raw);
    expect(text.stdout).not.toMatch(forgedLine);
    expect(text.stdout).toMatch(new RegExp(`^.*SafetensorsHeaderInvalid: .*${quoted.replace(/[\\[\]().*+?^$|{}]/g, "\\$&")}$`, "m"));
    const json = await runShardctl(world, ["plan", "forged", "--json"]);
    expect(json.stdout).not.toMatch(raw);
    const { errors } = JSON.parse(json.stdout) as { errors: string[] };
    expect(errors[0]).toContain(quoted);
    expect(errors[0]).not.toMatch(/[\n\r]/);
  });

  test("`diff` shows a recorded cluster's name escaped on its one line: a ledger entry cannot forge a decision", async () => {
    // A state dir another tool wrote, or an older shardctl: its cluster name fakes a launch line and retitles the terminal.
    const cluster = "orphan\n+ d1: launch revision 000000000000\u001b]0;pwned\u0007";
    const ledger = new Ledger(world.stateDir);
    await ledger.write({ cluster, revision: "1".repeat(64), phase: "running", startedAt: new Date().toISOString(), processes: [], ports: [] });
    try {
      const r = await runShardctl(world, ["diff"]);
      // 1: the directory's "forged" definition cannot be planned (its model's header is refused).
      expect(r.code).toBe(1);
      expect(r.stdout + r.stderr).not.toMatch(raw);
      expect(r.stdout).not.toMatch(/^\+ d1/m);
      expect(r.stdout).toMatch(/^- orphan\\u000a\+ d1: launch revision 000000000000\\u001b\]0;pwned\\u0007: prune/m);
    } finally {
      await ledger.remove(cluster);
    }
  });

  test("`status` shows the daemon's refusal without a line the name made", async () => {
    daemon = await startInProcessDaemon(world);
    await waitForStatus(world, "forged", (s) => s.lastError?.reason === "SafetensorsHeaderInvalid", 30_000);
    const r = await runShardctl(world, ["status", "forged"]);
    expect(r.stdout + r.stderr).not.toMatch(raw);
    expect(r.stdout).not.toMatch(forgedLine);
    expect(r.stdout).toContain(quoted);
  });
});

describe("the daemon's human log line", () => {
  test("escapes what a message or a field quotes, and colours only with its own codes", () => {
    const line = JSON.stringify({ level: 50, time: Date.now(), msg: `stage exited: ${hostile}`, component: hostile, file: `a${hostile}`, err: { message: hostile } });
    const plain = formatLogLine(line, false);
    expect(plain).not.toMatch(raw);
    expect(plain).toContain("\\u001b]0;pwned");
    // With colour, the only escapes are the line's own SGR codes.
    // eslint-disable-next-line no-control-regex -- matching terminal escape codes is the point
    expect(formatLogLine(line, true).replace(/\u001b\[[0-9;]*m/g, "")).not.toMatch(raw);
    expect(formatLogLine(`not json ${hostile}`, false)).not.toMatch(raw);
  });
});
