import { spawn } from "node:child_process";
import { lchown, lstat, mkdir, mkdtemp, readdir, readFile, rm, stat, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { parse } from "yaml";
import { createRegistrar, readRouterConfig } from "../../src/router/index.js";
import { isShardctlError } from "../../src/errors/index.js";

const ORIGINAL = `# Router for the lab. Owned by ops; shardctl only touches backends.
server:
  bind_address: "0.0.0.0:8080"   # all interfaces
  workers: 4

# Hand-written backends stay as they are.
backends:
  - name: "vllm-cluster"
    url: "http://vllm-service:8000"
    weight: 4
    models: ["model-a"]
    timeout: 30s   # continuum-only key
  - name: "ollama"   # the laptop
    url: "http://10.0.0.9:11434"
    models:
      - llama3

selection_strategy: RoundRobin
# end of file
`;

let dir: string;
let file: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "shardctl-router-reg-"));
  file = join(dir, "router.yaml");
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

const cluster = { name: "llama-pp", url: "http://127.0.0.1:9100", models: ["llama-8b"], weight: 2 };

describe("continuum file registrar", () => {
  it("adds a backend and preserves comments, key order, other keys and other backends", async () => {
    await writeFile(file, ORIGINAL);
    const registrar = createRegistrar({ kind: "continuum", config: file });
    await registrar.register(cluster);
    const text = await readFile(file, "utf8");
    // Everything before the new entry is byte-for-byte what was there.
    const cut = ORIGINAL.indexOf("\nselection_strategy");
    expect(text.startsWith(ORIGINAL.slice(0, cut))).toBe(true);
    expect(text).toContain("selection_strategy: RoundRobin\n# end of file\n");
    for (const comment of ["# Router for the lab.", "# all interfaces", "# Hand-written backends", "# continuum-only key", "# the laptop"]) {
      expect(text).toContain(comment);
    }
    const parsed = parse(text) as { server: unknown; backends: Array<Record<string, unknown>>; selection_strategy: string };
    expect(Object.keys(parsed)).toEqual(["server", "backends", "selection_strategy"]);
    expect(parsed.server).toEqual({ bind_address: "0.0.0.0:8080", workers: 4 });
    expect(parsed.backends.map((backend) => backend.name)).toEqual(["vllm-cluster", "ollama", "llama-pp"]);
    expect(parsed.backends[2]).toEqual({ name: "llama-pp", url: "http://127.0.0.1:9100", weight: 2, models: ["llama-8b"] });
    expect(await registrar.lookup("llama-pp")).toEqual(cluster);
    expect((await registrar.list()).map((entry) => entry.name)).toEqual(["vllm-cluster", "ollama", "llama-pp"]);
  });

  it("register is idempotent: same entry leaves the file untouched, a changed one replaces in place", async () => {
    await writeFile(file, ORIGINAL);
    const registrar = createRegistrar({ kind: "continuum", config: file });
    await registrar.register(cluster);
    const first = await readFile(file, "utf8");
    const inode = (await stat(file)).ino;
    await registrar.register({ ...cluster });
    expect(await readFile(file, "utf8")).toBe(first);
    expect((await stat(file)).ino).toBe(inode);

    await registrar.register({ name: "vllm-cluster", url: "http://vllm-service:9000", models: ["model-a", "model-b"] });
    const config = await readRouterConfig(file);
    expect(config.backends.filter((entry) => entry.name === "vllm-cluster")).toEqual([
      { name: "vllm-cluster", url: "http://vllm-service:9000", models: ["model-a", "model-b"] },
    ]);
    const text = await readFile(file, "utf8");
    // The replaced entry keeps its own extra key and comment, and stays where it was.
    expect(text).toContain("timeout: 30s   # continuum-only key");
    expect(config.backends.map((entry) => entry.name)).toEqual(["vllm-cluster", "ollama", "llama-pp"]);
  });

  it("deregister removes only that entry; deregistering a missing entry is fine", async () => {
    await writeFile(file, ORIGINAL);
    const registrar = createRegistrar({ kind: "continuum", config: file });
    await registrar.register(cluster);
    await registrar.deregister("llama-pp");
    expect(await readFile(file, "utf8")).toBe(ORIGINAL);
    await registrar.deregister("llama-pp");
    await registrar.deregister("never-there");
    expect(await readFile(file, "utf8")).toBe(ORIGINAL);
    expect(await registrar.lookup("llama-pp")).toBeUndefined();
  });

  it("creates a missing file with a comment and the backends list, and empties it back to []", async () => {
    const registrar = createRegistrar({ kind: "continuum", config: file });
    expect(await registrar.list()).toEqual([]);
    await expect(stat(file)).rejects.toThrow();
    await registrar.register(cluster);
    const text = await readFile(file, "utf8");
    expect(text.startsWith("# continuum-router configuration.")).toBe(true);
    expect(parse(text)).toEqual({ backends: [{ name: "llama-pp", url: "http://127.0.0.1:9100", weight: 2, models: ["llama-8b"] }] });
    await registrar.deregister("llama-pp");
    expect(parse(await readFile(file, "utf8"))).toEqual({ backends: [] });
  });

  it("a file removed while it runs (a git clean, a checkout) is written again as it was last seen, its server settings kept, with the edit", async () => {
    await writeFile(file, ORIGINAL);
    const registrar = createRegistrar({ kind: "continuum", config: file });
    await registrar.register(cluster);
    await rm(file);
    await registrar.register({ ...cluster, name: "second", url: "http://127.0.0.1:9200" });
    const text = await readFile(file, "utf8");
    expect(text.startsWith("# Router for the lab. Owned by ops;")).toBe(true);
    const config = parse(text) as { server: { bind_address: string }; backends: Array<{ name: string }> };
    expect(config.server.bind_address).toBe("0.0.0.0:8080");
    expect(config.backends.map((b) => b.name)).toEqual(["vllm-cluster", "ollama", "llama-pp", "second"]);
  });

  it("fills a `backends:` key that is present but empty", async () => {
    await writeFile(file, "server:\n  bind_address: 127.0.0.1:8080\nbackends:\n");
    await createRegistrar({ kind: "continuum", config: file }).register(cluster);
    const config = await readRouterConfig(file);
    expect(config.bind).toEqual({ host: "127.0.0.1", port: 8080 });
    expect(config.backends).toEqual([cluster]);
  });

  it("serialises concurrent registrations from one process: none is lost", async () => {
    await writeFile(file, ORIGINAL);
    // Two registrars on the same file, as a daemon with two clusters would have.
    const a = createRegistrar({ kind: "continuum", config: file });
    const b = createRegistrar({ kind: "continuum", config: join(dir, ".", "router.yaml") });
    const names = Array.from({ length: 30 }, (_, index) => `cluster-${index}`);
    await Promise.all(names.map((name, index) => (index % 2 === 0 ? a : b).register({ name, url: `http://127.0.0.1:${9000 + index}`, models: [name] })));
    const listed = (await a.list()).map((entry) => entry.name);
    expect(listed.slice(0, 2)).toEqual(["vllm-cluster", "ollama"]);
    expect(listed.slice(2).sort()).toEqual([...names].sort());
    await Promise.all(names.map((name) => a.deregister(name)));
    expect(await readFile(file, "utf8")).toBe(ORIGINAL);
  });

  it("writes atomically: a concurrent reader never sees a partial file, and no temp file is left", async () => {
    await writeFile(file, ORIGINAL);
    const registrar = createRegistrar({ kind: "continuum", config: file });
    // A separate process reads the file in a tight loop and counts reads that are not a whole file.
    const reader = spawn(
      process.execPath,
      [
        "-e",
        `const fs = require("fs"); let reads = 0, bad = 0; const end = Date.now() + 60000;
         process.stdin.on("data", () => { console.log(JSON.stringify({ reads, bad })); process.exit(0); });
         (function loop() { for (let i = 0; i < 200; i++) { let t; try { t = fs.readFileSync(${JSON.stringify(file)}, "utf8"); } catch { bad++; continue; }
           reads++; if (!t.startsWith("# Router for the lab.") || !t.endsWith("# end of file\\n")) bad++; }
           if (Date.now() < end) setImmediate(loop); })();`,
      ],
      { stdio: ["pipe", "pipe", "inherit"] },
    );
    let out = "";
    reader.stdout.on("data", (chunk: Buffer) => (out += chunk.toString()));
    const done = new Promise<void>((resolve) => reader.once("exit", () => resolve()));
    for (let round = 0; round < 40; round++) {
      await registrar.register({ name: `c${round}`, url: "http://127.0.0.1:9000", models: ["m".repeat(200 + round)] });
      if (round % 3 === 0) await registrar.deregister(`c${round - 1}`);
    }
    reader.stdin.write("stop\n");
    await done;
    const { reads, bad } = JSON.parse(out) as { reads: number; bad: number };
    expect(reads).toBeGreaterThan(100);
    expect(bad).toBe(0);
    expect(await readdir(dir)).toEqual(["router.yaml"]);
  });

  it("keeps the file's mode", async () => {
    await writeFile(file, ORIGINAL, { mode: 0o600 });
    await createRegistrar({ kind: "continuum", config: file }).register(cluster);
    expect((await stat(file)).mode & 0o777).toBe(0o600);
  });

  it("a config that is a link to the router's real one: the real file gets the entry, the link stays", async () => {
    await mkdir(join(dir, "real"));
    const real = join(dir, "real", "config.yaml");
    await writeFile(real, ORIGINAL);
    await symlink("real/config.yaml", file);
    const registrar = createRegistrar({ kind: "continuum", config: file });
    await registrar.register(cluster);
    expect((await lstat(file)).isSymbolicLink()).toBe(true);
    expect((parse(await readFile(real, "utf8")) as { backends: Array<{ name: string }> }).backends.map((b) => b.name)).toEqual(["vllm-cluster", "ollama", "llama-pp"]);
    await registrar.deregister("llama-pp");
    expect((await lstat(file)).isSymbolicLink()).toBe(true);
    expect(await readFile(real, "utf8")).not.toContain("llama-pp");
    expect((await readdir(join(dir, "real"))).sort()).toEqual(["config.yaml"]);
  });

  it("a link to the config owned by another user (not root) is not written through: refused, the file it leads to untouched", async () => {
    await mkdir(join(dir, "real"));
    const real = join(dir, "real", "config.yaml");
    await writeFile(real, ORIGINAL);
    await symlink("real/config.yaml", file);
    // Whoever else can write the directory could point such a link at any file of their choosing.
    await lchown(file, 65534, 65534);
    const error = await createRegistrar({ kind: "continuum", config: file })
      .register(cluster)
      .catch((e: unknown) => e);
    expect(isShardctlError(error, "RouterRegistrationFailed")).toBe(true);
    expect((error as Error).message).toContain("the link is owned by uid 65534, neither this user nor root: not written through");
    expect(await readFile(real, "utf8")).toBe(ORIGINAL);
    expect((await lstat(file)).isSymbolicLink()).toBe(true);
  });

  it("refuses a broken YAML file with RouterRegistrationFailed and leaves it as it was", async () => {
    const broken = "backends:\n  - name: [unclosed\n";
    await writeFile(file, broken);
    const registrar = createRegistrar({ kind: "continuum", config: file });
    const error: unknown = await registrar.register(cluster).catch((caught: unknown) => caught);
    expect(isShardctlError(error, "RouterRegistrationFailed")).toBe(true);
    expect(await readFile(file, "utf8")).toBe(broken);
  });

  it("refuses an entry the router could not use before touching the file", async () => {
    const registrar = createRegistrar({ kind: "continuum", config: file });
    const error: unknown = await registrar.register({ name: "x", url: "ftp://nope", models: ["m"] }).catch((caught: unknown) => caught);
    expect(isShardctlError(error, "RouterRegistrationFailed")).toBe(true);
    await expect(stat(file)).rejects.toThrow();
  });
});

describe("createRegistrar", () => {
  it("kind none records nothing and writes nothing", async () => {
    const registrar = createRegistrar({ kind: "none", config: file });
    await registrar.register(cluster);
    expect(await registrar.lookup("llama-pp")).toBeUndefined();
    expect(await registrar.list()).toEqual([]);
    await registrar.deregister("llama-pp");
    expect(await readdir(dir)).toEqual([]);
  });

  it("continuum without a config or admin URL is a terminal settings error", () => {
    let error: unknown;
    try {
      createRegistrar({ kind: "continuum" });
    } catch (caught) {
      error = caught;
    }
    expect(isShardctlError(error, "RouterSettingsInvalid")).toBe(true);
    expect((error as { terminal: boolean }).terminal).toBe(true);
  });
});
