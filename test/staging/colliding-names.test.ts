/**
 * A model whose files a node is to hold differ only in letter case or Unicode form: on macOS, whose
 * file systems ignore both by default, one would overwrite the other. Staging refuses it before
 * anything is written, naming both files; files a stage does not need may collide.
 */
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { LocalNode } from "../../src/nodes/index.js";
import { hashLocalManifest, stageNode } from "../../src/staging/index.js";

let root: string;

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), "shardctl-colliding-names-"));
});

afterAll(async () => {
  if (root) await rm(root, { recursive: true, force: true });
});

async function pushSource(name: string, files: string[]): Promise<string> {
  const dir = join(root, name);
  await mkdir(dir);
  for (const file of files) await writeFile(join(dir, file), file);
  return dir;
}

it.each([
  ["letter case", "Model.json", "model.json"],
  ["Unicode form", "caf\u00e9.json", "cafe\u0301.json"],
])("two names differing only in %s: refused before anything is written, naming both", async (_what, first, second) => {
  const dir = await pushSource(`push-${first.length}-${second.length}-${_what.length}`, [first, second, "config.json"]);
  const manifest = await hashLocalManifest(dir, "org/colliding");
  const modelDir = join(root, `node-${_what.replace(/\W/g, "")}`);
  const node = new LocalNode({ name: "mac-1", host: "local", modelDir });
  const refused = stageNode(node, { kind: "push", dir, repo: "org/colliding" }, manifest, { files: "all" });
  await expect(refused).rejects.toMatchObject({ reason: "FileNamesCollide", terminal: true });
  const message = await refused.catch((e: Error) => e.message);
  expect(message).toContain(first);
  expect(message).toContain(second);
  expect(message).toContain("rename one in the source");
  expect(existsSync(modelDir)).toBe(false);
  // A stage that needs only one of them is staged.
  const result = await stageNode(node, { kind: "push", dir, repo: "org/colliding" }, manifest, { files: [first, "config.json"] });
  expect(result.filesTransferred).toBe(2);
});
