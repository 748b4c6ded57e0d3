/**
 * The project's own Python virtual environment for tests and benchmarks that run MLX's reference
 * implementation (mlx-lm): `<repo>/.venv-mlx`, with pinned versions of mlx-lm and MLX's CPU backend.
 * It is created when missing or when the pinned versions are not the ones installed (a marker file
 * records them), under an exclusive lock so test files running in parallel install it once. When
 * present it costs one small file read. A fresh install takes about 40 s (pip downloads ~60 MB).
 * When python3's venv module is missing and we are root, Debian's python3-venv is installed with
 * apt-get; otherwise it fails naming the package. No vitest imports (bench uses it too).
 */
import { execFile, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdir, readFile, rm, writeFile } from "node:fs/promises";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { aptInstall } from "./apt.js";

const run = promisify(execFile);

/** Pinned versions: mlx-lm's CPU extra pulls MLX and its CPU backend, pinned too so they cannot drift. */
export const mlxPins = { mlxLm: "0.32.2", mlx: "0.32.4", mlxCpu: "0.32.4" } as const;

const requirements = [`mlx-lm[cpu]==${mlxPins.mlxLm}`, `mlx==${mlxPins.mlx}`, `mlx-cpu==${mlxPins.mlxCpu}`];

/** The repository root: this file is test/support/mlx-venv.ts (or its build under dist/test/support). */
function findRepoRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 5; i++) {
    if (existsSync(join(dir, "package.json")) && existsSync(join(dir, "test", "support"))) return dir;
    dir = dirname(dir);
  }
  return resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");
}

export const mlxVenvDir = join(findRepoRoot(), ".venv-mlx");
const python = join(mlxVenvDir, "bin", "python");
const markerFile = join(mlxVenvDir, "shardctl-pins.json");
const lockFile = join(dirname(mlxVenvDir), ".venv-mlx.lock");

export interface MlxVenv {
  /** The venv's python interpreter (absolute path). */
  python: string;
  mlxLmVersion: string;
  mlxVersion: string;
}

/** Make sure `.venv-mlx` holds the pinned mlx-lm and MLX; install them when not. */
export async function ensureMlxVenv(): Promise<MlxVenv> {
  const ready = await readMarker();
  if (ready !== undefined) return ready;
  return withLock(async () => {
    // Another process may have installed it while this one waited for the lock.
    const again = await readMarker();
    if (again !== undefined) return again;
    await ensureVenvModule();
    await rm(mlxVenvDir, { recursive: true, force: true });
    await run("python3", ["-m", "venv", mlxVenvDir], { maxBuffer: 16 << 20 });
    await run(python, ["-m", "pip", "install", "--disable-pip-version-check", "--quiet", ...requirements], { maxBuffer: 64 << 20, timeout: 15 * 60_000 });
    const versions = await queryVersions();
    if (versions.mlxLmVersion !== mlxPins.mlxLm || versions.mlxVersion !== mlxPins.mlx) {
      throw new Error(`pip installed mlx-lm ${versions.mlxLmVersion} and mlx ${versions.mlxVersion}, expected ${mlxPins.mlxLm} and ${mlxPins.mlx}`);
    }
    await writeFile(markerFile, JSON.stringify({ pins: mlxPins, ...versions }) + "\n");
    return { python, ...versions };
  });
}

/** The venv when it is installed with the pinned versions (by a test run, or `npm run bench -- engines`); undefined otherwise. Installs nothing. */
export function findMlxVenv(): Promise<MlxVenv | undefined> {
  return readMarker();
}

/** The venv as the marker describes it, when the marker records exactly the pinned versions. */
async function readMarker(): Promise<MlxVenv | undefined> {
  if (!existsSync(python)) return undefined;
  try {
    const marker = JSON.parse(await readFile(markerFile, "utf8")) as { pins?: Record<string, string>; mlxLmVersion?: string; mlxVersion?: string };
    const same = Object.entries(mlxPins).every(([key, value]) => marker.pins?.[key] === value);
    if (!same || marker.mlxLmVersion === undefined || marker.mlxVersion === undefined) return undefined;
    return { python, mlxLmVersion: marker.mlxLmVersion, mlxVersion: marker.mlxVersion };
  } catch {
    return undefined;
  }
}

/** What the venv's python reports (imports mlx-lm, so it also proves the install works). */
async function queryVersions(): Promise<{ mlxLmVersion: string; mlxVersion: string }> {
  const { stdout } = await run(python, ["-c", "import mlx_lm, mlx.core as mx; print(mlx_lm.__version__); print(mx.__version__)"]);
  const [mlxLmVersion = "", mlxVersion = ""] = stdout.trim().split("\n");
  return { mlxLmVersion, mlxVersion };
}

/** python3 with its venv module (and ensurepip, which venv needs for pip), installing Debian's python3-venv when root. */
async function ensureVenvModule(): Promise<void> {
  const probe = (): Promise<boolean> =>
    run("python3", ["-c", "import venv, ensurepip"]).then(
      () => true,
      () => false,
    );
  if (await probe()) return;
  if (process.getuid?.() !== 0) {
    throw new Error(`python3 with its venv module is missing: install Debian's "python3-venv" package (apt-get install -y python3-venv)`);
  }
  await aptInstall(["python3-venv"]);
  if (!(await probe())) throw new Error(`installing "python3-venv" did not give python3 a working venv module`);
}

/**
 * Run `body` holding an exclusive lock on `.venv-mlx.lock`: a `flock` child process holds it while
 * it lives and releases it when it exits (even when this process is killed), so a stale lock cannot
 * block later runs.
 */
async function withLock<T>(body: () => Promise<T>): Promise<T> {
  await mkdir(dirname(lockFile), { recursive: true });
  // flock waits for the lock, prints one line once it holds it, then sleeps until we close its stdin.
  const holder = spawn("flock", [lockFile, "sh", "-c", "echo locked; read _"], { stdio: ["pipe", "pipe", "inherit"] });
  await new Promise<void>((done, fail) => {
    holder.once("error", (error) => fail(new Error(`cannot run flock (util-linux) to lock ${lockFile}: ${error.message}`)));
    holder.once("exit", (code) => fail(new Error(`flock on ${lockFile} exited ${code} before locking`)));
    holder.stdout.once("data", () => done());
  });
  try {
    return await body();
  } finally {
    holder.removeAllListeners("exit");
    if (holder.exitCode === null && holder.signalCode === null) {
      const exited = new Promise((done) => holder.once("exit", done));
      holder.stdin.end();
      await exited;
    }
  }
}
