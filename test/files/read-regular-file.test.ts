/**
 * readRegularFile / openRegularFile against real special files: FIFOs made with mkfifo, a listening
 * UNIX socket, a directory, /dev/zero, symlinks. A FIFO must be refused at once — without a writer,
 * an ordinary open or read of it never returns, so every refusal here is also held to a deadline.
 */
import { execFileSync } from "node:child_process";
import { mkdir, mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isShardctlError } from "../../src/errors/index.js";
import { FileRefusedError, openRegularFile, readRegularFile, readRegularText } from "../../src/files/index.js";

let dir: string;
let fifo: string;
let socketPath: string;
let socketServer: Server;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "shardctl-files-"));
  fifo = join(dir, "pipe.toml");
  execFileSync("mkfifo", [fifo]);
  socketPath = join(dir, "sock");
  socketServer = createServer();
  await new Promise<void>((done) => socketServer.listen(socketPath, done));
});
afterAll(async () => {
  await new Promise<void>((done) => socketServer.close(() => done()));
  await rm(dir, { recursive: true, force: true });
});

/** The error `promise` rejects with, failing the test if it takes longer than `deadlineMs` (a hang). */
async function refusal(promise: Promise<unknown>, deadlineMs = 2000): Promise<unknown> {
  const started = Date.now();
  let timer: NodeJS.Timeout | undefined;
  const hung = new Promise((_, fail) => (timer = setTimeout(() => fail(new Error(`still waiting after ${deadlineMs} ms: the read blocked`)), deadlineMs)));
  try {
    const error = await Promise.race([promise.then(() => new Error("expected a refusal, the read succeeded")), hung]).catch((e: unknown) => e);
    expect(Date.now() - started).toBeLessThan(deadlineMs);
    return error;
  } finally {
    clearTimeout(timer);
  }
}

describe("readRegularFile", () => {
  it("reads a regular file whole, as bytes or text, up to and including the cap", async () => {
    const file = join(dir, "ok.json");
    await writeFile(file, '{"a":1}');
    expect((await readRegularFile(file, { maxBytes: 7 })).toString()).toBe('{"a":1}');
    expect(await readRegularText(file, { maxBytes: 100 })).toBe('{"a":1}');
  });

  it("refuses a FIFO at once (NotRegularFile, terminal), naming the file and what it is", async () => {
    const error = await refusal(readRegularText(fifo, { maxBytes: 1024, what: "cluster definition" }));
    expect(isShardctlError(error, "NotRegularFile")).toBe(true);
    expect((error as FileRefusedError).terminal).toBe(true);
    expect((error as Error).message).toBe(
      `${fifo}: the cluster definition is a FIFO (named pipe), not a regular file; only regular files are read — replace it with the file itself`,
    );
    expect((error as FileRefusedError).detail).toContain("is a FIFO (named pipe)");
  });

  it("refuses a symlink to a FIFO (the link is followed, the target judged)", async () => {
    const link = join(dir, "link-to-pipe");
    await symlink(fifo, link);
    const error = await refusal(readRegularText(link, { maxBytes: 1024 }));
    expect(isShardctlError(error, "NotRegularFile")).toBe(true);
  });

  it("reads through a symlink to a regular file (an HF cache snapshot is all links)", async () => {
    const target = join(dir, "blob");
    await writeFile(target, "content");
    await symlink(target, join(dir, "link-to-blob"));
    expect(await readRegularText(join(dir, "link-to-blob"), { maxBytes: 100 })).toBe("content");
  });

  it("refuses a directory, a character device (/dev/zero never ends) and a UNIX socket", async () => {
    const sub = join(dir, "folder.toml");
    await mkdir(sub);
    for (const [path, kind] of [
      [sub, "a directory"],
      ["/dev/zero", "a character device"],
      [socketPath, "a socket"],
    ] as const) {
      const error = await refusal(readRegularFile(path, { maxBytes: 1024 }));
      expect(isShardctlError(error, "NotRegularFile"), `${path}: ${String(error)}`).toBe(true);
      expect((error as Error).message).toContain(`is ${kind}, not a regular file`);
    }
  });

  it("refuses a file over the cap before reading it (FileTooLarge), saying the size and the cap", async () => {
    const file = join(dir, "big.toml");
    await writeFile(file, Buffer.alloc(1024 * 1024 + 1, 0x20));
    const error = await refusal(readRegularText(file, { maxBytes: 1024 * 1024, what: "cluster definition" }));
    expect(isShardctlError(error, "FileTooLarge")).toBe(true);
    expect((error as Error).message).toContain("the cluster definition is 1048577 bytes, over the cap of 1048576 bytes (1 MiB)");
  });

  it("throws Node's own error for a missing file, so callers can still say 'not found'", async () => {
    const error = await readRegularText(join(dir, "nope"), { maxBytes: 10 }).catch((e: unknown) => e);
    expect((error as NodeJS.ErrnoException).code).toBe("ENOENT");
    expect(isShardctlError(error)).toBe(false);
  });
});

describe("openRegularFile", () => {
  it("opens a regular file without a cap and reports its size (weights are only read in part)", async () => {
    const file = join(dir, "weights.safetensors");
    await writeFile(file, Buffer.alloc(4096));
    const { handle, size } = await openRegularFile(file);
    try {
      expect(size).toBe(4096);
    } finally {
      await handle.close();
    }
  });

  it("refuses a FIFO at once even without a cap", async () => {
    const error = await refusal(openRegularFile(fifo, { what: "safetensors file" }));
    expect(isShardctlError(error, "NotRegularFile")).toBe(true);
    expect((error as Error).message).toContain("the safetensors file is a FIFO");
  });
});
