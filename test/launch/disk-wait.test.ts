/**
 * A launch waits for a stage whose model is read from a disk that hangs: the stage runs, waiting on
 * I/O (state D), and never listens. The looks the launch makes while it waits find it so: three in
 * a row are said in the timeline (`stage-0-disk-wait`), and the timeout's words say in how many
 * looks it was found waiting on I/O, naming the disk. A real process reads a real ext4 disk whose
 * loop device's backing store (an sshfs mount of a real sshd's folder) is frozen.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, test } from "vitest";
import { plannedProcess, startEngineProcess, stopEngineProcess } from "../../src/launch/processes.js";
import type { LedgerEntry } from "../../src/launch/ledger.js";
import { watchStopped } from "../../src/launch/stopped-watch.js";
import { LocalNode } from "../../src/nodes/index.js";
import { writeFile } from "node:fs/promises";
import { startSshdNodes, type SshdSet } from "../support/sshd.js";
import { makeHangingDisk, type HangingDisk } from "../support/hanging-disk.js";

let root: string;
let sshd: SshdSet;
let disk: HangingDisk | undefined;

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), "shardctl-disk-wait-"));
  sshd = await startSshdNodes({ count: 1 });
  const made = await makeHangingDisk(sshd, root);
  disk = made;
  await writeFile(join(made.path, "weights.bin"), Buffer.alloc(4 << 20, 7));
  await made.remountReadOnly();
}, 15 * 60_000);

afterAll(async () => {
  await disk?.close();
  await sshd?.close();
  if (root !== undefined) await rm(root, { recursive: true, force: true });
});

test("a stage reading its weights from a disk that hangs: said waiting on it while the launch waits, and in the timeout's words", async () => {
  const node = new LocalNode({ name: "n1", host: "local", modelDir: root });
  const planned = plannedProcess("stage", 0, "n1", join(root, "run"));
  await node.mkdir(planned.runDir);
  disk!.freeze();
  const started = await startEngineProcess(node, planned, ["sh", "-c", `cat ${join(disk!.path, "weights.bin")} > /dev/null; exec sleep 60`]);
  const events: Array<{ step: string; detail?: string }> = [];
  const entry = { cluster: "c", processes: [started] } as unknown as LedgerEntry;
  const watch = watchStopped(
    entry,
    () => node,
    (step, detail) => events.push({ step, ...(detail === undefined ? {} : { detail }) }),
    { intervalMs: 200 },
  );
  try {
    const phase = { what: "stage-0 to listen on 127.0.0.1:39600", until: new Date(Date.now() + 60_000) };
    for (let i = 0; i < 60 && !events.some((e) => e.step === "stage-0-disk-wait"); i++) {
      watch.look(phase);
      await new Promise((r) => setTimeout(r, 250));
    }
    const said = events.find((e) => e.step === "stage-0-disk-wait");
    expect(said?.detail).toMatch(
      /^waiting on I\/O \(pid \d+ in state D\) on n1, 3 looks in a row: most often its disk; a slow or hung file system under its model_dir holds it up while the launch waits for stage-0 to listen on 127\.0\.0\.1:39600 until \S+Z$/,
    );
    expect(watch.diskWords(started)).toMatch(
      /^; it was waiting on I\/O \(state D, most often its disk\) in \d+ of the \d+ looks at it: it reads from a slow or hung file system under its model_dir$/,
    );
    // Nothing of it is said stopped.
    expect(watch.words()).toBe("");
    expect(events.filter((e) => e.step.endsWith("-paused"))).toEqual([]);
  } finally {
    watch.close();
    disk!.thaw();
    await stopEngineProcess(node, started, 2_000);
  }
}, 120_000);

test("a stage that reads from a disk that answers is never said waiting on it", async () => {
  const node = new LocalNode({ name: "n1", host: "local", modelDir: root });
  const planned = plannedProcess("stage", 1, "n1", join(root, "run-ok"));
  await node.mkdir(planned.runDir);
  const started = await startEngineProcess(node, planned, ["sh", "-c", `cat ${join(disk!.path, "weights.bin")} > /dev/null; exec sleep 60`]);
  const events: string[] = [];
  const entry = { cluster: "c", processes: [started] } as unknown as LedgerEntry;
  const watch = watchStopped(
    entry,
    () => node,
    (step) => events.push(step),
    { intervalMs: 200 },
  );
  try {
    for (let i = 0; i < 8; i++) {
      watch.look({ what: "stage-1 to listen", until: new Date(Date.now() + 60_000) });
      await new Promise((r) => setTimeout(r, 250));
    }
    expect(events).toEqual([]);
    expect(watch.diskWords(started)).toBe("");
  } finally {
    watch.close();
    await stopEngineProcess(node, started, 2_000);
  }
}, 60_000);
