/**
 * A local command that cannot start because the process has no descriptor left (a flood of
 * connections to the daemon's router or dashboard used them up) is an answer, never the end of the
 * process: the daemon that runs it must live on to supervise its clusters. A real node process with
 * a low descriptor limit (`ulimit -n`) fills its table, then runs a command on LocalNode.
 */
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { expect, it } from "vitest";
import { builtFile } from "../../src/engine/built-file.js";

const localNode = builtFile(import.meta.url, "../../src/nodes/local-node.js");

it("a command started with no descriptor left fails as an answer (cannot start: EMFILE), and the process lives on", async () => {
  const script = `
    const { LocalNode } = await import(${JSON.stringify(localNode)});
    const { openSync, closeSync } = await import("node:fs");
    const node = new LocalNode({ name: "local", host: "local", modelDir: "/tmp" });
    const held = [];
    try { for (;;) held.push(openSync("/dev/null", "r")); } catch {}
    const starved = await node.run(["true"], { deadlineMs: 5000 });
    for (const fd of held) closeSync(fd);
    const after = await node.run(["echo", "ok"]);
    console.log(JSON.stringify({ held: held.length, starved: { exitCode: starved.exitCode ?? null, stderr: starved.stderr }, after: after.stdout }));
  `;
  const { stdout } = await promisify(execFile)("bash", ["-c", `ulimit -n 64 && exec "$0" --input-type=module -e "$1"`, process.execPath, script], { timeout: 30_000 });
  const result = JSON.parse(stdout) as { held: number; starved: { exitCode: number | null; stderr: string }; after: string };
  expect(result.held).toBeGreaterThan(0);
  expect(result.starved.exitCode).toBeNull();
  expect(result.starved.stderr).toMatch(/^true: cannot start: .*EMFILE/);
  expect(result.after).toBe("ok\n");
});
