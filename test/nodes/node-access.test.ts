import { randomBytes } from "node:crypto";
import { readFile, writeFile } from "node:fs/promises";
import { createServer, type AddressInfo, type Server } from "node:net";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isShardctlError } from "../../src/errors/index.js";
import { type NodeAccess, probeNode } from "../../src/nodes/index.js";
import { startBothNodes, type BothNodes } from "../support/both-nodes.js";
import { allocateHost } from "../support/test-world.js";

let both: BothNodes;

beforeAll(async () => {
  both = await startBothNodes("shardctl-local-node-");
});

afterAll(async () => {
  await both?.close();
});

const hostile = [
  "plain",
  "with space",
  "it's",
  `"double" and 'single'`,
  "$(touch /tmp/pwned-shardctl)",
  "`id`",
  "$HOME ${PATH}",
  "semi; rm -rf /nonexistent",
  "a\nnewline",
  "tab\there",
  "back\\slash",
  "*?[glob]",
  "-n",
  "--",
  "",
  "ünïcödé ✓",
  "!history",
  "|pipe&amp>redirect<",
];

describe.each(["local", "ssh"] as const)("%s node", (kind) => {
  const node = (): NodeAccess => both.node(kind);
  const dir = (): string => both.dir(kind);

  it("runs argv and returns one result shape for success and failure", async () => {
    const ok = await node().run(["sh", "-c", 'echo out; echo err >&2; exit "$1"', "sh", "0"]);
    expect(ok).toMatchObject({ exitCode: 0, signal: undefined, stdout: "out\n", stderr: "err\n", timedOut: false });
    const bad = await node().run(["sh", "-c", "exit 7"]);
    expect(bad.exitCode).toBe(7);
    expect(Object.keys(bad).sort()).toEqual(Object.keys(ok).sort());
  });

  it("round-trips hostile strings through the shell unchanged", async () => {
    const result = await node().run(["printf", "%s\\0", ...hostile]);
    expect(result.exitCode).toBe(0);
    expect(result.stdout.split("\0").slice(0, -1)).toEqual(hostile);
  });

  // Regression: on a local node a program that does not exist gave no exit code and no output,
  // which the engine check reported as "exit undefined: ".
  it("a program that does not exist exits 127 saying it is not found, as a shell says", async () => {
    const result = await node().run(["/nonexistent/shard-engine", "--version"]);
    expect(result.exitCode).toBe(127);
    expect(result.stderr).toMatch(/\/nonexistent\/shard-engine: (not found|No such file or directory)\n$/);
  });

  it("kills a command at its deadline", async () => {
    const result = await node().run(["sleep", "60"], { deadlineMs: 300 });
    expect(result.timedOut).toBe(true);
    expect(result.exitCode).toBeUndefined();
    expect(result.durationMs).toBeLessThan(30_000);
  });

  it("passes stdin and cwd", async () => {
    const result = await node().run(["sh", "-c", "pwd; cat"], { stdin: "hello", cwd: "/tmp" });
    expect(result.stdout).toBe("/tmp\nhello");
  });

  it("starts a detached process, refuses a wrong start time, signals and watches it exit", async () => {
    const log = join(dir(), `detached-${kind}.log`);
    const exitFile = join(dir(), `detached-${kind}.status`);
    const started = await node().startDetached(["sh", "-c", 'echo "hi $GREETING"; exec sleep 30'], {
      logFile: log,
      env: { GREETING: "there it's" },
      exitStatusFile: exitFile,
    });
    expect(started.pid).toBeGreaterThan(0);
    expect(await node().processStartTime(started.pid)).toBe(started.startTime);
    // A recycled pid (different start time) is never signalled.
    expect(await node().signal(started.pid, "SIGTERM", `${started.startTime}0`)).toBe(false);
    expect(await node().processStartTime(started.pid)).toBe(started.startTime);
    const exited = node().watchExit(started.pid, started.startTime);
    // Signalled once its command runs: a TERM the wrapper takes in the moment between its trap and
    // the command's exec is caught by the command's copy of the handler and lost (the stop's SIGKILL
    // after the grace period is there for that), and then sleep would run its 30 s here.
    await expect
      .poll(
        async () =>
          (
            await node()
              .readFile(log)
              .catch(() => Buffer.alloc(0))
          ).toString(),
        { timeout: 10_000 },
      )
      .toMatch(/^hi /);
    const t0 = Date.now();
    expect(await node().signal(started.pid, "SIGTERM", started.startTime)).toBe(true);
    await exited;
    expect(Date.now() - t0).toBeLessThan(15_000);
    expect(await node().processStartTime(started.pid)).toBeUndefined();
    // The wrapper shell may add its own "Terminated" line after the command's output.
    expect((await node().readFile(log)).toString()).toMatch(/^hi there it's\n/);
    await expect.poll(async () => (await node().stat(exitFile)) !== undefined).toBe(true);
    expect((await node().readFile(exitFile)).toString().trim()).toBe("143");
  });

  it("a detached process that ends at once still gets its start time (the one it noted itself), every time", async () => {
    // Gone before the start script could read /proc for it (a zombie or reaped): one start in a
    // dozen or so lost the race and was said to have exited immediately.
    for (let i = 0; i < 20; i++) {
      const log = join(dir(), `at-once-${kind}-${i}.log`);
      const started = await node().startDetached(["sh", "-c", "exit 0"], { logFile: log, exitStatusFile: join(dir(), `at-once-${kind}-${i}.status`) });
      expect(started.startTime).not.toBe("");
      await expect.poll(async () => (await node().processStartTime(started.pid)) === undefined).toBe(true);
    }
  });

  it("reads, writes (atomically, with mode), renames, stats, links and removes files", async () => {
    const base = join(dir(), `files-${kind}`);
    await node().mkdir(join(base, "a/b"));
    await node().writeFile(join(base, "a/b/secret"), "token", { mode: 0o600 });
    expect((await node().readFile(join(base, "a/b/secret"))).toString()).toBe("token");
    const mode = await node().run(["stat", "-c", "%a", join(base, "a/b/secret")]);
    expect(mode.stdout.trim()).toBe("600");
    await node().writeFile(join(base, "a/b/secret"), "replaced");
    await node().rename(join(base, "a/b/secret"), join(base, "moved"));
    const st = await node().stat(join(base, "moved"));
    expect(st).toMatchObject({ size: 8, type: "file" });
    await node().symlink("moved", join(base, "link"));
    expect(await node().readlink(join(base, "link"))).toBe("moved");
    const [viaLink, missing, directory] = await node().statMany([join(base, "link"), join(base, "nope"), join(base, "a")]);
    expect(viaLink?.ino).toBe(st?.ino);
    expect(missing).toBeUndefined();
    expect(directory?.type).toBe("directory");
    // A file that cannot be looked at (here a link loop; a failing disk's I/O error alike) is not
    // taken for a missing one, which staging would fetch again whole: it is said, with its path.
    await node().symlink("loop", join(base, "loop"));
    const refused = await node()
      .statMany([join(base, "nope"), join(base, "loop")])
      .catch((error: unknown) => error);
    expect(refused).toMatchObject({ reason: "NodeFileError" });
    expect((refused as Error).message).toMatch(new RegExp(`cannot look at ${join(base, "loop")}: Too many levels of symbolic links \\(a failing disk`));
    // A path longer than the file system takes is the configuration's to mend, said as such, not retried.
    const tooLong = await node()
      .statMany([join(base, "x".repeat(300))])
      .catch((error: unknown) => error);
    expect(tooLong).toMatchObject({ reason: "NodeFileError", terminal: true });
    expect((tooLong as Error).message).toMatch(/: File name too long, \d+ characters: the node's file system takes no path that long; set a shorter model_dir for node /);
    expect(await node().sha256(join(base, "moved"))).toBe(await shaOf("replaced"));
    await node().remove(base);
    expect(await node().stat(base)).toBeUndefined();
  });

  it("streams a local file to the node", async () => {
    const local = join(both.dir("local"), `put-source-${kind}`);
    const payload = Buffer.alloc(3 * 1024 * 1024 + 17, 7);
    await writeFile(local, payload);
    const target = join(dir(), `put-target-${kind}`);
    let progress = 0;
    await node().putFile(local, target, { onProgress: (n) => (progress = n) });
    expect(progress).toBe(payload.length);
    expect((await node().stat(target))?.size).toBe(payload.length);
    // Resume: cut the remote file short, then append the rest from that offset.
    await node().run(["truncate", "-s", "1000", target]);
    await node().putFile(local, target, { startOffset: 1000 });
    expect(await node().sha256(target)).toBe(await shaOf(payload));
  });

  it("stops a push when its signal aborts, at once, keeping what arrived; a push resumed from there completes the file", async () => {
    const local = join(both.dir("local"), `put-source-stopped-${kind}`);
    // Seconds of pushing on loopback: the abort comes within its first few MiB.
    const payload = randomBytes(128 * 1024 * 1024);
    await writeFile(local, payload);
    const target = join(dir(), `put-target-stopped-${kind}`);
    const controller = new AbortController();
    let abortedAt = 0;
    const pushed = node().putFile(local, target, {
      onProgress: (n) => {
        if (n < 4 * 1024 * 1024 || controller.signal.aborted) return;
        abortedAt = performance.now();
        controller.abort(new Error("called off"));
      },
      signal: controller.signal,
    });
    const error = await pushed.then(
      () => undefined,
      (e: unknown) => e as Error,
    );
    expect(error?.name).toBe("AbortError");
    expect(performance.now() - abortedAt).toBeLessThan(3_000);
    // Stopped short of the end, and the node still answers on the same connection.
    const arrived = (await node().stat(target))?.size ?? 0;
    expect(arrived).toBeGreaterThan(0);
    expect(arrived).toBeLessThan(payload.length);
    expect((await node().run(["echo", "still here"])).stdout).toBe("still here\n");
    await node().putFile(local, target, { startOffset: arrived });
    expect(await node().sha256(target)).toBe(await shaOf(payload));
    await node().remove(target);
  }, 60_000);

  it("stops hashing a file when its signal aborts, at once, and the hashing ends on the node", async () => {
    // 16 GiB of holes: seconds of hashing, no disk.
    const target = join(dir(), `hash-stopped-${kind}`);
    expect((await node().run(["truncate", "-s", "16G", target])).exitCode).toBe(0);
    const controller = new AbortController();
    const hashing = node()
      .sha256(target, { signal: controller.signal })
      .then(
        () => undefined,
        (e: unknown) => e as Error,
      );
    await new Promise((resolve) => setTimeout(resolve, 300));
    const abortedAt = performance.now();
    controller.abort(new Error("called off"));
    const error = await hashing;
    expect(error?.name).toBe("AbortError");
    expect(performance.now() - abortedAt).toBeLessThan(2_000);
    // No sha256sum of it is left running on the node (a local node hashes in process).
    const hashers = async (): Promise<string> =>
      (await node().run(["sh", "-c", 'ps -eo args | grep -F -- "$1" | grep -v grep || true', "sh", `sum -- ${target}`])).stdout;
    for (let i = 0; i < 20 && (await hashers()) !== ""; i++) await new Promise((resolve) => setTimeout(resolve, 100));
    expect(await hashers()).toBe("");
    await node().remove(target);
  }, 30_000);

  it("tests TCP ports from the node", async () => {
    // A leased address: once closed, nothing else can be listening on that port there.
    const host = await allocateHost();
    const server: Server = createServer((s) => s.destroy());
    await new Promise<void>((r) => server.listen(0, host, () => r()));
    const { port } = server.address() as AddressInfo;
    expect(await node().isPortOpen(host, port, 2_000)).toBe(true);
    await new Promise<void>((r) => server.close(() => r()));
    expect(await node().isPortOpen(host, port, 2_000)).toBe(false);
  });

  it("probes OS, memory and disk", async () => {
    const probe = await probeNode(node(), { engineBinary: "node" });
    expect(probe).toMatchObject({ reachable: true, os: "Linux", accelerator: "cpu" });
    expect(probe.engineVersion).toMatch(/^v\d+/);
    expect(probe.memoryTotalBytes).toBeGreaterThan(probe.memoryAvailableBytes ?? Infinity);
    expect(probe.diskFreeBytes).toBeGreaterThan(0);
  });

  it("keeps a version line the node cut in the middle of a character without the broken character", async () => {
    // One byte, then two-byte characters: the node's cut at 256 bytes ends in the first byte of one.
    const engine = join(dir(), `wide-version-${kind}`);
    await writeFile(engine, `#!/bin/sh\nprintf 'x%s\\n' "${"é".repeat(200)}"\n`, { mode: 0o755 });
    const probe = await probeNode(node(), { engineBinary: engine });
    expect(probe.engineVersion).toBe(`x${"é".repeat(127)}`);
  });

  it("reports a missing engine binary as an error, never as its version", async () => {
    const probe = await probeNode(node(), { engineBinary: "/nonexistent/mlxcel-server" });
    expect(probe.reachable).toBe(true);
    expect(probe.engineVersion).toBeUndefined();
    expect(probe.error).toMatch(/^engine --version failed: .*not found/);
    // What to do, not only the shell's words.
    expect(probe.error).toContain(
      "(there is no executable /nonexistent/mlxcel-server on the node: give the engine's absolute path there, as --engine-binary and as [engine] binary)",
    );
  });

  it("says an engine named without a path is not on a non-interactive shell's PATH", async () => {
    const probe = await probeNode(node(), { engineBinary: "no-such-engine-server" });
    expect(probe.engineVersion).toBeUndefined();
    expect(probe.error).toMatch(
      /^engine --version failed: .*not found \(no-such-engine-server is not on the PATH of a non-interactive shell on the node: give the engine's absolute path there/,
    );
    // An engine that is there but fails says only how it failed.
    const failing = await probeNode(node(), { engineBinary: "false" });
    expect(failing.error).toMatch(/^engine --version failed: /);
    expect(failing.error).not.toContain("PATH");
  });
});

async function shaOf(text: string | Buffer): Promise<string> {
  const { createHash } = await import("node:crypto");
  return createHash("sha256").update(text).digest("hex");
}

describe("ssh pool", () => {
  it("multiplexes many concurrent commands over one connection", async () => {
    const n = both.node("ssh");
    const results = await Promise.all(Array.from({ length: 40 }, (_, i) => n.run(["echo", String(i)])));
    expect(results.map((r) => r.stdout.trim())).toEqual(Array.from({ length: 40 }, (_, i) => String(i)));
    // One TCP connection from us to this sshd.
    const sshdNode = both.sshd.nodes[0]!;
    const conns = await n.run(["sh", "-c", `ss -tnH state established '( sport = :${sshdNode.port} )' | wc -l`]);
    expect(conns.stdout.trim()).toBe("1");
  });

  it("reconnects after the connection drops", async () => {
    const n = both.node("ssh");
    expect((await n.run(["true"])).exitCode).toBe(0);
    // Kill the sshd process serving our connection: the pooled connection drops under us. The
    // shell may kill it before sshd has confirmed the exec (a busy machine runs the child first),
    // so the command either reports a failure or is refused; either way the connection is gone.
    const cut = await n.run(["sh", "-c", "kill -9 $PPID"]).then(
      (r) => r.exitCode,
      (error: unknown) => (isShardctlError(error, "NodeUnreachable") ? "dropped" : Promise.reject(error)),
    );
    expect(cut).not.toBe(0);
    expect((await n.run(["echo", "back"])).stdout).toBe("back\n");
  });
});

describe("known_hosts file", () => {
  it("is never written in strict mode", async () => {
    expect(await readFile(both.sshd.knownHostsPath, "utf8")).toBe(both.sshd.nodes.map((n) => n.knownHostsLine).join("\n") + "\n");
  });
});

describe("ssh node: resuming a push", () => {
  it("rewrites the window of writes that were in flight, so a hole a failed write left below the size is filled", async () => {
    const node = both.node("ssh");
    const local = join(both.dir("local"), "put-source-holes");
    const payload = Buffer.from(Array.from({ length: 3 * 1024 * 1024 + 17 }, (_, i) => (i * 2654435761) >>> 24));
    await writeFile(local, payload);
    // What fastPut leaves when one 32 KiB write failed (a full disk) while later ones in flight
    // succeeded (space freed meanwhile): the size says 2.5 MiB arrived, 32 KiB below it are zeros.
    const size = 2.5 * 1024 * 1024;
    const partial = Buffer.from(payload.subarray(0, size));
    partial.fill(0, size - 1024 * 1024, size - 1024 * 1024 + 32 * 1024);
    const staged = join(both.dir("local"), "put-partial-holes");
    await writeFile(staged, partial);
    const target = join(both.sshd.nodes[0]!.modelDir, "put-target-holes");
    await node.putFile(staged, target);
    let progress = 0;
    await node.putFile(local, target, { startOffset: size, onProgress: (n) => (progress = n) });
    expect(await node.sha256(target)).toBe(await shaOf(payload));
    // Progress counts the bytes past the offset asked for, not the window written again.
    expect(progress).toBe(payload.length - size);
  });
});
