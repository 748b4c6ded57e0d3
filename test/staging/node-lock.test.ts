/**
 * The lock every shardctl process takes on a node before it writes a blob there (a daemon and a
 * `shardctl stage` beside it once collided on one `.incomplete` file), on a local node and a real
 * SSH node: a second holder waits for the first and is told who it is; a lock whose holder stopped
 * touching it two minutes ago, one this process left, and one of a process of this machine that no
 * longer runs are taken over; a wait ends when the staging is stopped; the lock is removed however
 * the work ends.
 */
import { execFile, spawn, spawnSync } from "node:child_process";
import { mkdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { hostname } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { acquireScript, lockHolderText, lockPathOf, withNodeLock } from "../../src/staging/node-lock.js";
import { startBothNodes, type BothNodes } from "../support/both-nodes.js";

const run = promisify(execFile);
let both: BothNodes;

beforeAll(async () => {
  both = await startBothNodes("shardctl-node-lock-");
}, 60_000);

afterAll(async () => {
  await both?.close();
});

/** Whether `path` exists on this machine (both nodes' directories are here). */
async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  );
}

describe.each(["local", "ssh"] as const)("%s node", (kind) => {
  const file = (name: string): string => join(both.dir(kind), name);

  it("a second holder waits for the first, told who holds it, and works only after it is released", async () => {
    // The first holder is another process: its lock, as it leaves it while it writes the file.
    const lock = lockPathOf(file("blob-a"));
    await mkdir(lock);
    await writeFile(join(lock, "holder"), "shardctl (pid 4242 on another-control-machine)\n");
    const told: string[] = [];
    let began = false;
    const second = withNodeLock(
      both.node(kind),
      file("blob-a"),
      async () => {
        began = true;
        return 7;
      },
      { pollMs: 100, onWait: (holder) => told.push(holder) },
    );
    await new Promise((r) => setTimeout(r, 700));
    expect(began).toBe(false);
    expect(told).toEqual(["shardctl (pid 4242 on another-control-machine)"]);
    // The first is done: it removes its lock.
    await rm(lock, { recursive: true });
    expect(await second).toBe(7);
    expect(await exists(lock)).toBe(false);
  });

  it("a lock its holder stopped touching over two minutes ago is taken over at once", async () => {
    const lock = lockPathOf(file("blob-b"));
    await mkdir(lock);
    await writeFile(join(lock, "holder"), "shardctl (pid 1 on a machine that was switched off)\n");
    await run("touch", ["-d", "3 minutes ago", join(lock, "holder")]);
    const started = Date.now();
    expect(await withNodeLock(both.node(kind), file("blob-b"), () => Promise.resolve("mine"), { pollMs: 100 })).toBe("mine");
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(await exists(lock)).toBe(false);
  });

  it("a lock touched within two minutes is not taken over; a stopped staging ends its wait, and the holder's lock stays", async () => {
    const lock = lockPathOf(file("blob-c"));
    await mkdir(lock);
    await writeFile(join(lock, "holder"), "shardctl (pid 2 elsewhere)\n");
    const stop = new AbortController();
    setTimeout(() => stop.abort(new Error("the definition changed")), 1_500);
    const waited = await withNodeLock(both.node(kind), file("blob-c"), () => Promise.resolve("never"), { pollMs: 100, signal: stop.signal }).catch(
      (e: unknown) => e as { reason?: string; message: string },
    );
    expect(waited).toMatchObject({ reason: "StagingCancelled" });
    expect((waited as Error).message).toMatch(/staging stopped while it took the node's lock of .*blob-c: the definition changed$/);
    expect(await exists(join(lock, "holder"))).toBe(true);
  });

  it("a lock whose holder beats is not taken over however old the node's clock makes it look; once its beat stands still for staleMs, it is", async () => {
    const lock = lockPathOf(file("blob-i"));
    await mkdir(lock);
    await writeFile(join(lock, "holder"), "shardctl (pid 3 on ctl-2, 0123456789ab)\n");
    // Another process's live lock as a node whose clock stepped ten minutes forward shows it: every
    // beat lands, and the files' times are ten minutes behind the clock.
    let beat = 0;
    const beatOnce = async (): Promise<void> => {
      await writeFile(join(lock, "beat"), `${++beat}\n`);
      await run("touch", ["-d", "10 minutes ago", join(lock, "holder"), join(lock, "beat"), lock]);
    };
    await beatOnce();
    let beating = true;
    const beats = (async () => {
      while (beating) {
        await new Promise((r) => setTimeout(r, 300));
        if (beating) await beatOnce();
      }
    })();
    let began: number | undefined;
    const started = Date.now();
    const second = withNodeLock(
      both.node(kind),
      file("blob-i"),
      async () => {
        began = Date.now();
        return "taken";
      },
      { pollMs: 100, staleMs: 1_500 },
    );
    await new Promise((r) => setTimeout(r, 3_000));
    expect(began).toBeUndefined();
    // The holder stops (killed, cut off): its beat stands still from here.
    beating = false;
    await beats;
    const stoppedAt = Date.now();
    expect(await second).toBe("taken");
    expect(began! - stoppedAt).toBeGreaterThanOrEqual(1_000);
    expect(began! - started).toBeLessThan(15_000);
    expect(await exists(lock)).toBe(false);
  });

  it("the holder beats its lock while it works", async () => {
    const lock = lockPathOf(file("blob-j"));
    await withNodeLock(
      both.node(kind),
      file("blob-j"),
      async () => {
        const first = await readFile(join(lock, "beat"), "utf8");
        await new Promise((r) => setTimeout(r, 800));
        const later = await readFile(join(lock, "beat"), "utf8");
        expect(Number(first)).toBeGreaterThanOrEqual(0);
        expect(Number(later)).toBeGreaterThan(Number(first));
        expect(await readFile(join(lock, "holder"), "utf8")).toBe(`${lockHolderText()}\n`);
      },
      { refreshMs: 150 },
    );
    expect(await exists(lock)).toBe(false);
  });

  it("a lock left by an earlier pass of this very process (its removal failed with its connection) is taken over at once", async () => {
    const lock = lockPathOf(file("blob-e"));
    await mkdir(lock);
    await writeFile(join(lock, "holder"), `${lockHolderText()}\n`);
    const started = Date.now();
    expect(await withNodeLock(both.node(kind), file("blob-e"), () => Promise.resolve("mine again"), { pollMs: 100 })).toBe("mine again");
    expect(Date.now() - started).toBeLessThan(5_000);
  });

  it("a lock naming a process of this machine that no longer runs (a daemon killed mid-staging) is taken over at once", async () => {
    const gone = spawnSync(process.execPath, ["-e", "0"]).pid;
    const lock = lockPathOf(file("blob-f"));
    await mkdir(lock);
    // As that process named itself: this machine and pid namespace, its own pid and token.
    const holder = lockHolderText()
      .replace(/pid \d+/, `pid ${gone}`)
      .replace(/, [0-9a-f]+\)$/, ", 0123456789ab)");
    expect(holder).toContain(hostname());
    await writeFile(join(lock, "holder"), `${holder}\n`);
    const started = Date.now();
    expect(await withNodeLock(both.node(kind), file("blob-f"), () => Promise.resolve("taken"), { pollMs: 100 })).toBe("taken");
    expect(Date.now() - started).toBeLessThan(5_000);
  });

  it("a lock that can be neither made nor found (its folder is missing or cannot be written) fails at once, naming it", async () => {
    const started = Date.now();
    const failed = await withNodeLock(both.node(kind), join(file("no-such-folder"), "blob-g"), () => Promise.resolve("never")).catch(
      (e: unknown) => e as { reason?: string; message: string },
    );
    expect(failed).toMatchObject({ reason: "NodeFileError" });
    expect((failed as Error).message).toMatch(/taking the lock .*no-such-folder\/blob-g\.lock exited with 2: cannot make /);
    expect(Date.now() - started).toBeLessThan(5_000);
  });

  it("a lock taken over from this process while it worked (it was cut off past two minutes) is not removed by it", async () => {
    const lock = lockPathOf(file("blob-h"));
    await withNodeLock(both.node(kind), file("blob-h"), async () => {
      // Another process took the lock over meanwhile: its holder text now.
      await writeFile(join(lock, "holder"), "shardctl (pid 77 on ctl-3, 0a0b0c0d0e0f)\n");
    });
    expect(await exists(join(lock, "holder"))).toBe(true);
    await rm(lock, { recursive: true });
  });

  it("the lock is removed when the work fails", async () => {
    const failed = await withNodeLock(both.node(kind), file("blob-d"), () => Promise.reject(new Error("transfer cut"))).catch((e: unknown) => e as Error);
    expect(failed.message).toBe("transfer cut");
    // Removed without holding up the failure: gone moments later.
    const deadline = Date.now() + 3_000;
    while ((await exists(lockPathOf(file("blob-d")))) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    expect(await exists(lockPathOf(file("blob-d")))).toBe(false);
  });
});

it("a lock made for a caller that went away as it asked (its channel closed) is removed by the command that made it", async () => {
  const dir = both.dir("local");
  const lock = lockPathOf(join(dir, "blob-gone"));
  // The caller's end of the command's output is closed before the command answers: its answer
  // cannot be read, so nobody would know the lock is held.
  const child = spawn("sh", ["-c", acquireScript, "sh", lock, lockHolderText(), "", ""], { stdio: ["ignore", "pipe", "pipe"] });
  child.stdout.destroy();
  const code = await new Promise<number | null>((resolve) => child.on("close", resolve));
  expect(code).toBe(2);
  expect(await exists(lock)).toBe(false);
});
