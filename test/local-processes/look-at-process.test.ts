/**
 * lookAtProcess on real processes of this machine: one that runs, one killed but never reaped (a
 * zombie keeps its pid and start time, and runs nothing), one gone, and one this user may not
 * signal (EPERM: it runs).
 */
import { spawn, spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { expect, test } from "vitest";
import { lookAtProcess } from "../../src/local-processes/index.js";

test("a running process runs, with its start time from /proc", async () => {
  const seen = await lookAtProcess(process.pid);
  const stat = await readFile(`/proc/${process.pid}/stat`, "utf8");
  expect(seen).toEqual({ runs: true, startTime: stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19] });
});

test("a zombie runs nothing; a reaped pid and a pid that cannot be one run nothing", async () => {
  // `sleep 1`'s parent becomes `sleep 30`, which never waits for it: it stays a zombie.
  const parent = spawn("sh", ["-c", "sleep 1 & echo $!; exec sleep 30"], { stdio: ["ignore", "pipe", "ignore"] });
  try {
    const zombie = Number(await new Promise<string>((resolve) => parent.stdout.once("data", (d: Buffer) => resolve(d.toString().trim()))));
    expect((await lookAtProcess(zombie)).runs).toBe(true);
    let stat = "";
    for (let i = 0; i < 200 && !/\) Z /.test(stat); i++) {
      await new Promise((r) => setTimeout(r, 20));
      stat = await readFile(`/proc/${zombie}/stat`, "utf8");
    }
    expect(stat).toMatch(/\) Z /);
    expect((await lookAtProcess(zombie)).runs).toBe(false);
  } finally {
    parent.kill("SIGKILL");
  }
  const gone = spawnSync("true").pid!;
  expect(await lookAtProcess(gone)).toEqual({ runs: false, startTime: "" });
  for (const pid of [0, -1, 1.5, Number.NaN]) expect((await lookAtProcess(pid)).runs).toBe(false);
});

test("a process another user runs, which this one may not signal (EPERM), runs", () => {
  if (process.getuid?.() !== 0) throw new Error("this test runs as root, to look at pid 1 as user nobody");
  const module = new URL("../../dist/src/local-processes/index.js", import.meta.url).pathname;
  if (!existsSync(module)) throw new Error(`${module} is missing: run \`npm run build\` first`);
  // As user nobody (uid 65534), pid 1 (root's init) answers kill(1, 0) with EPERM.
  const script = `import(${JSON.stringify(module)}).then(async (m) => console.log(JSON.stringify(await m.lookAtProcess(1))))`;
  const run = spawnSync(process.execPath, ["-e", script], { encoding: "utf8", uid: 65534, gid: 65534 });
  expect(run.stderr).toBe("");
  expect(JSON.parse(run.stdout)).toMatchObject({ runs: true });
});
