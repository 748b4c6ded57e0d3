/**
 * `shardctl make-test-model` never replaces a model it was pointed at by mistake: writing a test
 * model deletes the directory's safetensors files, so a directory that already holds a model is
 * refused (exit 1, naming it and the way out) unless `--force` says to replace it.
 */
import { mkdir, mkdtemp, readFile, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { requireBuild, shardctl } from "./support/run-shardctl.js";

let root: string;
beforeAll(async () => {
  requireBuild();
  root = await mkdtemp(join(tmpdir(), "shardctl-make-test-model-"));
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

describe("shardctl make-test-model into a directory that holds a model", () => {
  it("refuses a real model's directory and leaves every file as it was", async () => {
    const dir = join(root, "real");
    await mkdir(dir);
    await writeFile(join(dir, "config.json"), '{"model_type": "llama"}\n');
    await writeFile(join(dir, "model-00001-of-00002.safetensors"), "real weights 1");
    await writeFile(join(dir, "model-00002-of-00002.safetensors"), "real weights 2");

    const run = await shardctl(["make-test-model", dir]);

    expect(run.code).toBe(1);
    expect(run.stdout).toBe("");
    expect(run.stderr).toBe(
      `shardctl: ${dir} already holds a model (config.json, model-00001-of-00002.safetensors, model-00002-of-00002.safetensors): ` +
        "make-test-model would replace its weights with random ones; give it an empty directory, or pass --force to replace that model\n",
    );
    expect((await readdir(dir)).sort()).toEqual(["config.json", "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]);
    expect(await readFile(join(dir, "model-00001-of-00002.safetensors"), "utf8")).toBe("real weights 1");
  });

  it("replaces it with --force", async () => {
    const dir = join(root, "forced");
    await mkdir(dir);
    await writeFile(join(dir, "model.safetensors"), "old weights");

    const run = await shardctl(["make-test-model", dir, "--force"]);

    expect(run).toMatchObject({ code: 0, stderr: "" });
    expect(JSON.parse(await readFile(join(dir, "config.json"), "utf8"))).toMatchObject({ model_type: "llama" });
    expect((await readFile(join(dir, "model.safetensors"))).length).toBeGreaterThan(1000);
  });

  it("writes into a directory that is missing, or holds no model", async () => {
    const other = join(root, "notes");
    await mkdir(other);
    await writeFile(join(other, "README.md"), "not a model\n");

    expect(await shardctl(["make-test-model", join(root, "missing", "tiny")])).toMatchObject({ code: 0, stderr: "" });
    expect(await shardctl(["make-test-model", other])).toMatchObject({ code: 0, stderr: "" });
    expect(await readFile(join(other, "README.md"), "utf8")).toBe("not a model\n");
  });
});
