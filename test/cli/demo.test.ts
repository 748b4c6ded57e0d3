/**
 * `npm start`'s demo, run for real from a copy of this repository's shardctl.toml and
 * clusters/demo.toml (only its ports moved to free ones, so it cannot collide with a demo a
 * developer is running): it must print "ready", answer through the embedded router, and leave no
 * process behind after Ctrl-C (SIGINT).
 */
import { spawn } from "node:child_process";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, expect, test } from "vitest";
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { freePort, freePortRange, repoRoot } from "../reconciler/daemon-fixture.js";

/** Live (non-zombie) processes whose command line mentions `needle`. */
async function processesMentioning(needle: string): Promise<string[]> {
  const { stdout } = await promisify(execFile)("ps", ["-eo", "stat=,args="], { maxBuffer: 16 << 20 });
  return stdout.split("\n").filter((line) => line.includes(needle) && !line.trim().startsWith("Z"));
}

let root: string | undefined;
afterAll(async () => {
  if (root !== undefined) await rm(root, { recursive: true, force: true });
});

test("npm start's demo: ready, answers through the router, Ctrl-C leaves nothing running", async () => {
  root = await mkdtemp(join(tmpdir(), "shardctl-demo-"));
  const settings = await readFile(join(repoRoot, "shardctl.toml"), "utf8");
  const definition = await readFile(join(repoRoot, "clusters/demo.toml"), "utf8");
  const range = await freePortRange(["127.0.0.1"], 4);
  const coordinatorPort = await freePort();
  expect(settings).toMatch(/port_range = "39600-39629"/);
  expect(definition).toMatch(/port = 8090/);
  await mkdir(join(root, "clusters"));
  await writeFile(join(root, "shardctl.toml"), settings.replace(/port_range = "39600-39629"/, `port_range = "${range}"`));
  await writeFile(join(root, "clusters/demo.toml"), definition.replace(/port = 8090/, `port = ${coordinatorPort}`));
  await mkdir(join(root, ".demo"));
  // Port 0: the router takes a free port as it binds (no window for a parallel test to take it first)
  // and the demo prints where it listens.
  await writeFile(join(root, ".demo/router.yaml"), `server:\n  bind_address: "127.0.0.1:0"\nbackends: []\n`);

  const demo = spawn(process.execPath, [join(repoRoot, "dist/src/cli/demo.js")], { cwd: root, stdio: ["ignore", "pipe", "pipe"] });
  let stdout = "";
  demo.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString("utf8")));
  let stderr = "";
  demo.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString("utf8")));
  const exited = new Promise<number | null>((resolve) => demo.once("exit", (code) => resolve(code)));
  try {
    const deadline = Date.now() + 90_000;
    while (!/ready/.test(stdout) && Date.now() < deadline && demo.exitCode === null) await new Promise((r) => setTimeout(r, 100));
    // On failure, say why (the demo's own output and logs), not only that "ready" never came.
    expect(stdout, `demo output:\n${stdout}\n${stderr.slice(-3000)}`).toMatch(/cluster "demo" is ready/);
    const routerUrl = /through the embedded router at (http:\/\/127\.0\.0\.1:\d+)/.exec(stdout)?.[1] ?? "(no router URL printed)";
    expect(routerUrl).not.toMatch(/:0$/);
    expect(stdout).toContain(`curl -s ${routerUrl}/v1/chat/completions`);
    expect(stdout).toContain("status --watch");

    const response = await fetch(`${routerUrl}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: ".demo/models/demo-llama", messages: [{ role: "user", content: "Hello" }], max_tokens: 4 }),
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
  expect(stdout).toMatch(/demo stopped: no process of it is left/);
  expect(await processesMentioning(root)).toEqual([]);
  // Its data stayed under the working directory.
  expect(await readFile(join(root, ".demo/models/demo-llama/config.json"), "utf8")).toContain('"llama"');
}, 180_000);
