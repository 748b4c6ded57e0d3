/**
 * `npm start`'s demo, run for real from a copy of this repository's shardctl.toml and
 * clusters/demo.toml (only its ports moved to free ones, so it cannot collide with a demo a
 * developer is running): it must print the dashboard's URL as soon as it serves, "ready" in lines
 * for people only, say its model is random, answer through the embedded router, and leave no
 * process behind after Ctrl-C (SIGINT). When a port it needs is taken it must exit 1 on its own,
 * naming the setting that moves that port.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { createServer, type AddressInfo, type Server } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, expect, test } from "vitest";
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { readStatus } from "../../src/reconciler/index.js";
import { pathExists } from "../../src/files/index.js";
import { makeTestModel } from "../../src/planner/test-model/index.js";
import { freePort, freePortRange, repoRoot } from "../reconciler/daemon-fixture.js";
import { startHubServer } from "../support/hub-server.js";

/** Live (non-zombie) processes whose command line mentions `needle`. */
async function processesMentioning(needle: string): Promise<string[]> {
  const { stdout } = await promisify(execFile)("ps", ["-eo", "stat=,args="], { maxBuffer: 16 << 20 });
  return stdout.split("\n").filter((line) => line.includes(needle) && !line.trim().startsWith("Z"));
}

const roots: string[] = [];
const holders: Server[] = [];
afterAll(async () => {
  for (const holder of holders) holder.close();
  for (const root of roots) await rm(root, { recursive: true, force: true });
});

/**
 * A temp copy of the demo's files with its ports moved: the coordinator to `coordinatorPort` (default
 * a free one), the router to `routerPort` and the dashboard to `uiPort` (default 0 both, so each takes
 * a free port as it binds, no window for a parallel test to take it first, and the demo prints where
 * it listens).
 */
async function demoRoot(ports: { coordinatorPort?: number; routerPort?: number; uiPort?: number } = {}): Promise<string> {
  const root = await mkdtemp(join(tmpdir(), "shardctl-demo-"));
  roots.push(root);
  const settings = await readFile(join(repoRoot, "shardctl.toml"), "utf8");
  const definition = await readFile(join(repoRoot, "clusters/demo.toml"), "utf8");
  const range = await freePortRange(["127.0.0.1"], 4);
  const coordinatorPort = ports.coordinatorPort ?? (await freePort());
  expect(settings).toMatch(/port_range = "39600-39629"/);
  expect(definition).toMatch(/port = 8090/);
  await mkdir(join(root, "clusters"));
  await writeFile(
    join(root, "shardctl.toml"),
    settings.replace(/port_range = "39600-39629"/, `port_range = "${range}"`).replace(/ui_address = "127\.0\.0\.1:\d+"/, `ui_address = "127.0.0.1:${ports.uiPort ?? 0}"`),
  );
  await writeFile(join(root, "clusters/demo.toml"), definition.replace(/port = 8090/, `port = ${coordinatorPort}`));
  await mkdir(join(root, ".demo"));
  await writeFile(join(root, ".demo/router.yaml"), `server:\n  bind_address: "127.0.0.1:${ports.routerPort ?? 0}"\nbackends: []\n`);
  return root;
}

type DemoRun = { child: ChildProcess; stdout: () => string; stderr: () => string; exited: Promise<number | null> };

function runDemo(root: string): DemoRun {
  const child = spawn(process.execPath, [join(repoRoot, "dist/src/cli/demo.js")], { cwd: root, stdio: ["ignore", "pipe", "pipe"] });
  let stdout = "";
  child.stdout!.on("data", (chunk: Buffer) => (stdout += chunk.toString("utf8")));
  let stderr = "";
  child.stderr!.on("data", (chunk: Buffer) => (stderr += chunk.toString("utf8")));
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  return { child, stdout: () => stdout, stderr: () => stderr, exited };
}

/** A real listener holding a port the kernel picked on 127.0.0.1, as another program would. */
async function holdPort(): Promise<number> {
  const holder = createServer();
  holders.push(holder);
  await new Promise<void>((resolve) => holder.listen(0, "127.0.0.1", resolve));
  return (holder.address() as AddressInfo).port;
}

/** Lines of the output that are JSON objects: log lines meant for machines. */
function jsonLines(output: string): string[] {
  return output.split("\n").filter((line) => {
    try {
      const parsed: unknown = JSON.parse(line);
      return typeof parsed === "object" && parsed !== null;
    } catch {
      return false;
    }
  });
}

/** The demo's exit code, once it exits on its own; a demo still running after `deadlineMs` is interrupted and fails the test. */
async function exitOnItsOwn(run: DemoRun, deadlineMs: number): Promise<number | null> {
  const timedOut = Symbol("timed out");
  const outcome = await Promise.race([run.exited, new Promise<typeof timedOut>((resolve) => setTimeout(() => resolve(timedOut), deadlineMs))]);
  if (outcome !== timedOut) return outcome;
  run.child.kill("SIGINT");
  await Promise.race([run.exited, new Promise((resolve) => setTimeout(resolve, 60_000))]);
  throw new Error(`the demo was still running ${deadlineMs} ms after it started, waiting instead of failing:\n${run.stdout()}\n${run.stderr()}`);
}

test("npm start's demo: ready, human lines only, says its model is random, answers through the router, Ctrl-C leaves nothing running", async () => {
  const root = await demoRoot();
  const run = runDemo(root);
  const demo = run.child;
  const exited = run.exited;
  let stdout = "";
  let stderr = "";
  const collect = (): void => {
    stdout = run.stdout();
    stderr = run.stderr();
  };
  try {
    const deadline = Date.now() + 90_000;
    // Until the ready block's last line, so every line of it has arrived.
    while (!/Ctrl-C tears the demo down/.test(run.stdout()) && Date.now() < deadline && demo.exitCode === null) await new Promise((r) => setTimeout(r, 100));
    collect();
    // On failure, say why (the demo's own output and logs), not only that "ready" never came.
    expect(stdout, `demo output:\n${stdout}\n${stderr.slice(-3000)}`).toMatch(/cluster "demo" is ready/);
    // The dashboard's URL comes as soon as it serves, before the launch ends: a slow or failing launch is when it helps.
    const dashboard = /^dashboard: (http:\/\/127\.0\.0\.1:\d+\/) \(open it in a browser/m.exec(stdout);
    expect(dashboard?.[1], stdout).toMatch(/:\d+\/$/);
    expect(dashboard!.index).toBeLessThan(stdout.indexOf('cluster "demo" is ready'));
    expect((await fetch(dashboard![1]!)).status).toBe(200);
    const routerUrl = /through the embedded router at (http:\/\/127\.0\.0\.1:\d+)/.exec(stdout)?.[1] ?? "(no router URL printed)";
    expect(routerUrl).not.toMatch(/:0$/);
    expect(stdout).toContain(`curl -s ${routerUrl}/v1/chat/completions`);
    expect(stdout).toContain("status --watch");
    // Said plainly, with what to change for a real model.
    expect(stdout).toMatch(/the demo model has random weights: its replies are meaningless bytes/);
    expect(stdout).toMatch(/edit \[model\] in clusters\/demo\.toml: id = "<org>\/<name>" \(a Hugging Face Hub id\)/);
    expect(stdout).toMatch(/a local MLX model directory/);

    // A second demo in the same directory says that one runs, and leaves it alone.
    const second = runDemo(root);
    expect(await exitOnItsOwn(second, 30_000), second.stderr()).toBe(1);
    expect(second.stderr()).toMatch(/another demo or daemon \(pid \d+\) already watches clusters: stop it first/);

    const response = await fetch(`${routerUrl}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      // Greedy: a sampled end-of-text first token (random weights) would make the count 0 now and then.
      body: JSON.stringify({ model: ".demo/models/demo-llama", messages: [{ role: "user", content: "Hello" }], max_tokens: 4, temperature: 0 }),
    });
    expect(response.status).toBe(200);
    const body = (await response.json()) as { usage: { completion_tokens: number } };
    expect(body.usage.completion_tokens).toBeGreaterThan(0);
    expect((await processesMentioning(root)).length).toBeGreaterThan(0);
  } finally {
    // Whatever happened above, the demo tears down before its directory goes (afterAll).
    demo.kill("SIGINT");
    await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 60_000))]);
  }
  expect(await exited).toBe(0);
  collect();
  expect(stdout).toMatch(/demo stopped: no process of it is left/);
  expect(await processesMentioning(root)).toEqual([]);
  // Only lines for people on the terminal; the daemon's JSON log lines went to the file it names.
  expect(jsonLines(stdout), stdout).toEqual([]);
  expect(jsonLines(stderr), stderr).toEqual([]);
  expect(stdout).toContain("daemon log: .demo/daemon.log");
  const log = (await readFile(join(root, ".demo/daemon.log"), "utf8")).trim().split("\n");
  expect(jsonLines(log.join("\n"))).toEqual(log);
  expect(log.some((line) => (JSON.parse(line) as { msg?: string }).msg === "daemon watching")).toBe(true);
  // Its data stayed under the working directory.
  expect(await readFile(join(root, ".demo/models/demo-llama/config.json"), "utf8")).toContain('"llama"');
}, 180_000);

// Regression: Ctrl-C during the launch left the wait for Ready running, which printed the health
// the teardown passed through ("  Healthy") below "tearing the demo down …".
test("Ctrl-C during the launch: the demo tears down and prints no health line after it says so", async () => {
  const root = await demoRoot();
  const run = runDemo(root);
  const deadline = Date.now() + 60_000;
  // Interrupted as soon as the launch is under way, not once it is ready.
  while (!/^dashboard: /m.test(run.stdout()) && Date.now() < deadline && run.child.exitCode === null) await new Promise((r) => setTimeout(r, 20));
  run.child.kill("SIGINT");
  expect(await exitOnItsOwn(run, 60_000), run.stderr()).toBe(0);
  const stdout = run.stdout();
  const after = stdout.slice(stdout.indexOf("tearing the demo down …")).split("\n").slice(1);
  expect(after, stdout).toEqual(["demo stopped: no process of it is left", ""]);
  expect(await processesMentioning(root)).toEqual([]);
}, 120_000);

// One demo start serves two cases: the run that takes over a killed demo's cluster is the one whose
// terminal is then closed.
test("a demo killed with SIGKILL left its cluster running: the next run takes it over instead of calling its port taken; its terminal closed (SIGHUP) once ready, it tears down as on Ctrl-C, leaving nothing running; the last run's log is kept", async () => {
  const root = await demoRoot();
  const waitReady = async (run: DemoRun): Promise<void> => {
    const deadline = Date.now() + 90_000;
    while (!/Ctrl-C tears the demo down/.test(run.stdout()) && Date.now() < deadline && run.child.exitCode === null) await new Promise((r) => setTimeout(r, 100));
    expect(run.stdout(), run.stderr()).toMatch(/Ctrl-C tears the demo down/);
  };
  const first = runDemo(root);
  await waitReady(first);
  first.child.kill("SIGKILL");
  await first.exited;
  expect((await processesMentioning(root)).length).toBeGreaterThan(0);
  // The killed run's log, as it left it: the next run keeps it as daemon.log.1.
  const earlier = await readFile(join(root, ".demo/daemon.log"), "utf8");
  expect(earlier).toContain("daemon watching");
  const second = runDemo(root);
  await waitReady(second);
  expect(second.stderr()).not.toMatch(/already in use/);
  second.child.kill("SIGHUP");
  expect(await exitOnItsOwn(second, 60_000), second.stderr()).toBe(0);
  expect(second.stdout()).toMatch(/demo stopped: no process of it is left/);
  expect(await processesMentioning(root)).toEqual([]);
  expect(await readFile(join(root, ".demo/daemon.log.1"), "utf8")).toBe(earlier);
  const log = await readFile(join(root, ".demo/daemon.log"), "utf8");
  expect(log).toContain("dashboard listening");
  expect(log.startsWith(earlier)).toBe(false);
  // The status file still says Stopped from that run's teardown: the next run does not print it
  // as its own first word.
  expect((await readStatus(join(root, "clusters/demo.status.json")))?.health).toBe("Stopped");
  const third = runDemo(root);
  await waitReady(third);
  const healthLines = third
    .stdout()
    .split("\n")
    .filter((line) => /^ {2}[A-Z][a-z]+( \(|$)/.test(line));
  expect(healthLines[0], third.stdout()).not.toMatch(/^ {2}Stopped/);
  third.child.kill("SIGINT");
  expect(await exitOnItsOwn(third, 60_000), third.stderr()).toBe(0);
}, 260_000);

test("the demo's coordinator port is taken: exit 1 before the daemon starts, naming clusters/demo.toml and [coordinator] port", async () => {
  const taken = await holdPort();
  const root = await demoRoot({ coordinatorPort: taken });
  const run = runDemo(root);
  // Without the fast failure the demo would wait for a Ctrl-C; 30 s is far more than it needs.
  const code = await exitOnItsOwn(run, 30_000);
  const output = `${run.stdout()}\n${run.stderr()}`;
  expect(code, output).toBe(1);
  // Named with who holds it: this test's own process.
  expect(run.stderr()).toContain(`the coordinator's port 127.0.0.1:${taken} is already in use by pid ${process.pid} (`);
  expect(run.stderr()).toContain(`set a free port in clusters/demo.toml: [coordinator] port = ${taken}`);
  expect(jsonLines(run.stdout())).toEqual([]);
  expect(jsonLines(run.stderr())).toEqual([]);
  expect(run.stdout()).toMatch(/^the demo cannot start: an address it needs is taken \(below\); nothing of it was started$/m);
  expect(await processesMentioning(root)).toEqual([]);
  // Found before the daemon started: no launch was tried, and no status file says one was.
  expect(run.stdout()).not.toMatch(/daemon watching/);
  await expect(readFile(join(root, "clusters/demo.status.json"), "utf8")).rejects.toMatchObject({ code: "ENOENT" });
}, 120_000);

test("the demo's router port is taken: exit 1 on its own, naming .demo/router.yaml and server.bind_address", async () => {
  const taken = await holdPort();
  const root = await demoRoot({ routerPort: taken });
  const run = runDemo(root);
  const code = await exitOnItsOwn(run, 30_000);
  const output = `${run.stdout()}\n${run.stderr()}`;
  expect(code, output).toBe(1);
  expect(run.stderr()).toContain(`the router's address 127.0.0.1:${taken} is already in use by pid ${process.pid} (`);
  expect(run.stderr()).toContain(".demo/router.yaml is the router config that [router] config in shardctl.toml names: edit its server.bind_address");
  expect(jsonLines(output)).toEqual([]);
  expect(await processesMentioning(root)).toEqual([]);
}, 60_000);

test("the demo's dashboard port is taken: exit 1 at once, naming shardctl.toml and [daemon] ui_address", async () => {
  const taken = await holdPort();
  const root = await demoRoot({ uiPort: taken });
  const run = runDemo(root);
  const code = await exitOnItsOwn(run, 30_000);
  const output = `${run.stdout()}\n${run.stderr()}`;
  expect(code, output).toBe(1);
  expect(run.stderr()).toContain(`the dashboard's address 127.0.0.1:${taken} is already in use by pid ${process.pid} (`);
  expect(run.stderr()).toContain(`set a free address in shardctl.toml: [daemon] ui_address = "127.0.0.1:${taken}"`);
  expect(jsonLines(output)).toEqual([]);
  expect(run.stdout()).toMatch(/^the demo cannot start: an address it needs is taken \(below\); nothing of it was started$/m);
  expect(await processesMentioning(root)).toEqual([]);
}, 60_000);

test("every port the demo needs is taken: exit 1 at once naming each, with the setting that moves it", async () => {
  const [coordinator, router, ui] = [await holdPort(), await holdPort(), await holdPort()];
  const root = await demoRoot({ coordinatorPort: coordinator, routerPort: router, uiPort: ui });
  const run = runDemo(root);
  const code = await exitOnItsOwn(run, 30_000);
  expect(code, `${run.stdout()}\n${run.stderr()}`).toBe(1);
  expect(run.stderr()).toContain(`the dashboard's address 127.0.0.1:${ui} is already in use`);
  expect(run.stderr()).toContain(`the router's address 127.0.0.1:${router} is already in use`);
  expect(run.stderr()).toContain(`the coordinator's port 127.0.0.1:${coordinator} is already in use`);
  expect(run.stderr()).toContain(`set a free port in clusters/demo.toml: [coordinator] port = ${coordinator}`);
  expect(run.stdout()).not.toMatch(/daemon watching/);
  expect(await processesMentioning(root)).toEqual([]);
}, 60_000);

test("[model] id names somebody's directory without config.json, or a path that does not exist: exit 1 naming it, and nothing is written there", async () => {
  const root = await demoRoot();
  const mine = join(root, "my-models");
  await mkdir(mine);
  await writeFile(join(mine, "notes.txt"), "mine\n");
  const definition = join(root, "clusters/demo.toml");
  await writeFile(definition, (await readFile(definition, "utf8")).replace('id = ".demo/models/demo-llama"', 'id = "my-models"'));
  const run = runDemo(root);
  const code = await exitOnItsOwn(run, 30_000);
  expect(code, `${run.stdout()}\n${run.stderr()}`).toBe(1);
  expect(run.stderr()).toContain("[model] id in clusters/demo.toml names my-models, which holds no model (no config.json there)");
  expect(await readdir(mine)).toEqual(["notes.txt"]);
  expect(await processesMentioning(root)).toEqual([]);
  // A mistyped path (nothing there) gets no random weights either.
  await writeFile(definition, (await readFile(definition, "utf8")).replace('id = "my-models"', 'id = "my-modles"'));
  const typo = runDemo(root);
  expect(await exitOnItsOwn(typo, 30_000), typo.stderr()).toBe(1);
  expect(typo.stderr()).toContain("names my-modles, which holds no model");
  expect(await pathExists(join(root, "my-modles"))).toBe(false);
}, 60_000);

test("a Hub model, as the demo's own output suggests: staged from the Hub and served, not called random", async () => {
  const modelDir = join(await mkdtemp(join(tmpdir(), "shardctl-demo-hub-")), "tiny");
  roots.push(dirname(modelDir));
  await makeTestModel(modelDir, { layers: 4, hidden: 64, vocab: 320, seed: 5 });
  const hub = await startHubServer({ repos: [{ repo: "test-org/tiny-llama", commit: "c".repeat(40), dir: modelDir }] });
  const root = await demoRoot();
  const settingsFile = join(root, "shardctl.toml");
  await writeFile(settingsFile, (await readFile(settingsFile, "utf8")).replace('endpoint = "https://huggingface.co"', `endpoint = "${hub.endpoint}"`));
  const definition = join(root, "clusters/demo.toml");
  const text = (await readFile(definition, "utf8")).replace('id = ".demo/models/demo-llama"', 'id = "test-org/tiny-llama"').replace('source = "push"', 'source = "hub"');
  await writeFile(definition, text);
  const run = runDemo(root);
  try {
    const deadline = Date.now() + 90_000;
    while (!/Ctrl-C tears the demo down/.test(run.stdout()) && Date.now() < deadline && run.child.exitCode === null) await new Promise((r) => setTimeout(r, 100));
    expect(run.stdout(), `${run.stdout()}\n${run.stderr().slice(-3000)}`).toMatch(/cluster "demo" is ready — serving test-org\/tiny-llama/);
    expect(run.stdout()).not.toMatch(/random weights/);
    expect(hub.stats().requests).toBeGreaterThan(0);
    expect(await pathExists(join(root, ".demo/models/demo-llama"))).toBe(false);
  } finally {
    run.child.kill("SIGINT");
    await Promise.race([run.exited, new Promise((resolve) => setTimeout(resolve, 60_000))]);
    await hub.close();
  }
  expect(await run.exited).toBe(0);
  expect(await processesMentioning(root)).toEqual([]);
}, 180_000);
