/**
 * `npm run bench -- staging`: staging figures, each against a baseline measured in the same run.
 *
 * - sha256 verify throughput (LocalNode.sha256, in-process) vs `sha256sum` on the same 1 GiB file.
 * - download throughput (staging's local downloader) vs `curl` from the same local Hub server, which
 *   runs in its own process so neither client shares an event loop with it; and the SSH-node path
 *   (the node runs curl, driven over the pooled connection) against the same curl baseline.
 * - SSH command round trips per second on the pooled connection vs a new `ssh` process per command.
 * - push throughput over SFTP (SshNode.putFile) vs OpenSSH's `scp`, and vs ssh2's fastPut with a
 *   fixed window of 64 writes (what pushes used before their window adapted to the link).
 * - re-stage time of a present 2 GiB model on an SSH node (goal < 1 s).
 *
 * Options: --size-mib N (big file size, default 1024). Big files are removed afterwards.
 */
import { execFile, spawn } from "node:child_process";
import { randomFillSync } from "node:crypto";
import { open, mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import { LocalNode, NodePool, type SshNode } from "../src/nodes/index.js";
import { fetchHubManifest, stageNode, transferFile } from "../src/staging/index.js";
import { sshNodeConfig, startSshdNodes } from "../test/support/sshd.js";

const exec = promisify(execFile);
const repo = "bench-org/big";
const commit = "feedfacefeedfacefeedfacefeedfacefeedface";

export async function run(args: string[]): Promise<object> {
  const sizeArg = args.indexOf("--size-mib");
  const sizeMiB = sizeArg >= 0 ? Number(args[sizeArg + 1]) : 1024;
  const root = await mkdtemp(join(tmpdir(), "shardctl-bench-staging-"));
  const modelDir = join(root, "model");
  await mkdir(modelDir);
  const sshd = await startSshdNodes({ count: 1, firstHost: 60 });
  const pool = new NodePool({ knownHostsPath: sshd.knownHostsPath, sshConfigPath: join(root, "none") });
  let hub: { endpoint: string; stop: () => void } | undefined;
  try {
    // Two different big files: the "2 GiB model" (one would dedupe into a single blob).
    const big1 = join(modelDir, "model-00001-of-00002.safetensors");
    const big2 = join(modelDir, "model-00002-of-00002.safetensors");
    await writeRandom(big1, sizeMiB, 1);
    await writeRandom(big2, sizeMiB, 2);
    await writeFile(join(modelDir, "config.json"), JSON.stringify({ model_type: "llama" }));
    const bytes = sizeMiB * 1024 * 1024;

    // sha256: ours vs sha256sum, interleaved, best of 3 each (the first run also warms the page cache).
    const local = new LocalNode({ name: "local", host: "local", modelDir: join(root, "local") });
    let ours = Number.POSITIVE_INFINITY;
    let theirs = Number.POSITIVE_INFINITY;
    for (let i = 0; i < 3; i++) {
      ours = Math.min(ours, await time(() => local.sha256(big1)));
      theirs = Math.min(theirs, await time(() => exec("sha256sum", [big1])));
    }
    const sha = { bytes, oursMBps: mbps(bytes, ours), sha256sumMBps: mbps(bytes, theirs), ratio: round(theirs / ours) };

    // Download: staging's downloader vs curl, same server (in its own process), same file.
    hub = await startHubProcess(modelDir);
    const manifest = await fetchHubManifest({ endpoint: hub.endpoint, repo, revision: "main" });
    const file = manifest.files.find((f) => f.path.endsWith("00001-of-00002.safetensors"))!;
    const source = { kind: "hub" as const, endpoint: hub.endpoint, repo, revision: "main" };
    await mkdir(join(root, "dl"), { recursive: true });
    const target = join(root, "dl", "ours.incomplete");
    const url = `${hub.endpoint}/${repo}/resolve/${commit}/${file.path}`;
    // Interleaved, best of 3 each: the machine is shared, so both see the same background load.
    let oursDl = Number.POSITIVE_INFINITY;
    let curlDl = Number.POSITIVE_INFINITY;
    for (let i = 0; i < 3; i++) {
      await rm(target, { force: true });
      oursDl = Math.min(
        oursDl,
        await time(() => transferFile({ node: local, source, commit, file, target, haveBytes: 0, deadlineMs: 600_000, idleMs: 60_000, onBytes: () => {} })),
      );
      curlDl = Math.min(curlDl, await time(() => exec("curl", ["-sf", "-o", join(root, "dl", "curl.out"), url])));
    }
    await rm(join(root, "dl"), { recursive: true, force: true });
    const download = { bytes, oursMBps: mbps(bytes, oursDl), curlMBps: mbps(bytes, curlDl), ratio: round(curlDl / oursDl) };

    // The SSH-node path: the node runs curl itself (resume with -C -), driven over the pooled connection.
    const n = sshd.nodes[0]!;
    const node = pool.get(sshNodeConfig(sshd, 0, { modelDir: join(n.modelDir, "hf") }));
    const remoteTarget = join(n.modelDir, "remote.incomplete");
    let viaNode = Number.POSITIVE_INFINITY;
    for (let i = 0; i < 2; i++) {
      await node.remove(remoteTarget);
      viaNode = Math.min(
        viaNode,
        await time(() => transferFile({ node, source, commit, file, target: remoteTarget, haveBytes: 0, deadlineMs: 600_000, idleMs: 60_000, onBytes: () => {} })),
      );
    }
    await node.remove(remoteTarget);
    const downloadOnSshNode = { oursMBps: mbps(bytes, viaNode), ratioToCurl: round(curlDl / viaNode) };

    // SSH round trips: pooled channels vs one ssh process per command.
    await node.run(["true"]);
    const pooledCount = 200;
    const pooled = await time(async () => {
      for (let i = 0; i < pooledCount; i++) await node.run(["true"]);
    });
    const sshCount = 20;
    const sshArgs = [
      "-i",
      sshd.identityFile,
      "-o",
      `UserKnownHostsFile=${sshd.knownHostsPath}`,
      "-o",
      "BatchMode=yes",
      "-F",
      "/dev/null",
      "-p",
      String(n.port),
      `${n.user}@${n.host}`,
      "true",
    ];
    const perProcess = await time(async () => {
      for (let i = 0; i < sshCount; i++) await exec("ssh", sshArgs);
    });
    const pooledRate = pooledCount / (pooled / 1000);
    const processRate = sshCount / (perProcess / 1000);
    const ssh = { pooledPerSec: Math.round(pooledRate), sshProcessPerSec: round(processRate), ratio: round(pooledRate / processRate) };

    // Push over SFTP: SshNode.putFile (its window adapts to the link) vs OpenSSH's scp and vs ssh2's
    // fastPut with the fixed window pushes used before (64 writes of 32 KiB), same file, same node,
    // interleaved, best of 2 each.
    const pushTarget = join(n.modelDir, "pushed");
    const sftp = await (node as SshNode).connection.sftp();
    let oursPush = Number.POSITIVE_INFINITY;
    let scpPush = Number.POSITIVE_INFINITY;
    let fastPutPush = Number.POSITIVE_INFINITY;
    const scpArgs = ["-q", ...sshArgs.slice(0, 8), "-P", String(n.port), big1, `${n.user}@${n.host}:${pushTarget}`];
    for (let i = 0; i < 2; i++) {
      oursPush = Math.min(oursPush, await time(() => node.putFile(big1, pushTarget)));
      scpPush = Math.min(scpPush, await time(() => exec("scp", scpArgs)));
      fastPutPush = Math.min(
        fastPutPush,
        await time(() => new Promise<void>((done, fail) => sftp.fastPut(big1, pushTarget, { concurrency: 64, chunkSize: 32 * 1024 }, (e) => (e ? fail(e) : done())))),
      );
    }
    await node.remove(pushTarget);
    const push = {
      bytes,
      oursMBps: mbps(bytes, oursPush),
      scpMBps: mbps(bytes, scpPush),
      fixedWindowMBps: mbps(bytes, fastPutPush),
      ratioToScp: round(scpPush / oursPush),
      ratioToFixedWindow: round(fastPutPush / oursPush),
    };

    // Re-stage of a present 2 × size model on the SSH node.
    const firstStage = await time(() => stageNode(node, source, manifest));
    const again = await bestOf(3, async () => {
      const result = await stageNode(node, source, manifest);
      if (result.bytesTransferred !== 0 || result.hashedFiles !== 0)
        throw new Error(`re-stage moved ${result.bytesTransferred} bytes, hashed ${result.hashedFiles} files`);
    });
    const restage = { modelBytes: 2 * bytes, firstStageMs: Math.round(firstStage), restageMs: round(again), goalMs: 1000 };

    return {
      sha256: { ...sha, goal: ">= 0.9" },
      download: { ...download, goal: ">= 0.9" },
      downloadOnSshNode,
      ssh: { ...ssh, goal: ">= 10" },
      push,
      restage,
    };
  } finally {
    hub?.stop();
    await pool.close();
    await sshd.close();
    await rm(root, { recursive: true, force: true });
  }
}

async function writeRandom(path: string, mib: number, seed: number): Promise<void> {
  const handle = await open(path, "w");
  const chunk = Buffer.alloc(16 << 20);
  try {
    for (let written = 0; written < mib; written += 16) {
      randomFillSync(chunk);
      chunk.writeUInt32LE(seed, 0);
      await handle.write(chunk, 0, Math.min(16, mib - written) << 20);
    }
  } finally {
    await handle.close();
  }
}

/** The Hub stand-in in a child process (compiled test/support), printing its endpoint. */
async function startHubProcess(dir: string): Promise<{ endpoint: string; stop: () => void }> {
  const module = resolve(import.meta.dirname, "../test/support/hub-server.js");
  const script = `const { startHubServer } = await import(${JSON.stringify(module)});
const hub = await startHubServer({ repos: [{ repo: ${JSON.stringify(repo)}, commit: ${JSON.stringify(commit)}, dir: ${JSON.stringify(dir)} }] });
console.log(hub.endpoint);`;
  const child = spawn(process.execPath, ["--input-type=module", "-e", script], { stdio: ["ignore", "pipe", "inherit"] });
  const endpoint = await new Promise<string>((resolveEndpoint, reject) => {
    child.stdout.once("data", (d: Buffer) => resolveEndpoint(d.toString().trim()));
    child.once("exit", (code) => reject(new Error(`hub server exited with ${code}`)));
  });
  return { endpoint, stop: () => child.kill() };
}

async function time(fn: () => Promise<unknown>): Promise<number> {
  const start = performance.now();
  await fn();
  return performance.now() - start;
}

async function bestOf(n: number, fn: () => Promise<unknown>): Promise<number> {
  let best = Number.POSITIVE_INFINITY;
  for (let i = 0; i < n; i++) best = Math.min(best, await time(fn));
  return best;
}

function mbps(bytes: number, ms: number): number {
  return round(bytes / 1e6 / (ms / 1000));
}

function round(x: number): number {
  return Math.round(x * 100) / 100;
}
