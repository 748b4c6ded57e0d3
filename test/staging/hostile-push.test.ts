/**
 * A push source is copied to every node, so what it may hold is narrow: regular files (links are
 * followed to regular files, wherever they lead), and no name that a terminal, a log or the push's
 * own file-list digest would misread (control characters, newlines, bidi overrides). Real files,
 * links and FIFOs; the refusals name the file and say what to do.
 */
import { execFileSync } from "node:child_process";
import { mkdir, mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { hashLocalManifest } from "../../src/staging/index.js";
import { isShardctlError, quoteText } from "../../src/errors/index.js";

// eslint-disable-next-line no-control-regex -- matching control characters is the point
const raw = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/;

let root: string;
let counter = 0;

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), "shardctl-hostile-push-"));
});

afterAll(async () => {
  if (root) await rm(root, { recursive: true, force: true });
});

/** A push folder holding a config.json, plus what `add` puts in it. */
async function pushDir(add: (dir: string) => Promise<void>): Promise<string> {
  const dir = join(root, `push-${++counter}`);
  await mkdir(dir, { recursive: true });
  await writeFile(join(dir, "config.json"), "{}");
  await add(dir);
  return dir;
}

/** The error hashing `dir` ends with (it must end with one). */
async function refusalOf(dir: string): Promise<{ reason: string; message: string }> {
  const error: unknown = await hashLocalManifest(dir, "org/model").then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!isShardctlError(error)) throw new Error(`hashing ${dir} did not fail with a ShardctlError: ${String(error)}`);
  return { reason: error.reason, message: error.message };
}

describe("links in a push source", () => {
  it("follows a link to a regular file wherever it leads (weights on another disk, an HF cache's blobs)", async () => {
    const elsewhere = join(root, "other-disk");
    await mkdir(elsewhere, { recursive: true });
    await writeFile(join(elsewhere, "model.safetensors"), "weights");
    const dir = await pushDir(async (d) => {
      await symlink(join(elsewhere, "model.safetensors"), join(d, "model.safetensors"));
      await writeFile(join(d, "real.json"), "{}");
      await symlink("real.json", join(d, "alias.json"));
    });
    const manifest = await hashLocalManifest(dir, "org/model");
    expect(manifest.files.map((f) => [f.path, f.size])).toEqual([
      ["alias.json", 2],
      ["config.json", 2],
      ["model.safetensors", 7],
      ["real.json", 2],
    ]);
  });

  it("refuses a link to a folder or to nothing, naming it", async () => {
    const toFolder = await pushDir(async (d) => {
      await mkdir(join(d, "..", `folder-${counter}`), { recursive: true });
      await symlink(join(d, "..", `folder-${counter}`), join(d, "weights"));
    });
    expect(await refusalOf(toFolder)).toMatchObject({ reason: "PushSourceInvalid", message: expect.stringContaining("weights is a symlink to a folder") });
    const dangling = await pushDir((d) => symlink(join(root, "no-such-file"), join(d, "tokenizer.json")));
    expect(await refusalOf(dangling)).toMatchObject({ reason: "PushSourceInvalid", message: expect.stringContaining("tokenizer.json is a symlink to a missing file") });
  });
});

describe("file names a push source may not hold", () => {
  const names = [
    "new\nline.json",
    "tab\tx.json",
    "\u001b]0;pwned\u0007.json",
    "\u001b[2Jclear.json",
    "c1\u009b31m.json",
    "model\u202enosj.safetensors",
    "del\u007f.json",
  ];
  for (const name of names) {
    it(`refuses ${quoteText(name)} with its characters escaped in the message`, async () => {
      const dir = await pushDir((d) => writeFile(join(d, name), "{}"));
      const refusal = await refusalOf(dir);
      expect(refusal.reason).toBe("UnsafeFileName");
      expect(refusal.message).toMatch(/contains a control character \(U\+[0-9A-F]{4}\); refusing to stage it/);
      expect(refusal.message).not.toMatch(raw);
    });
  }

  it("refuses a FIFO whose name is a terminal sequence without echoing the sequence", async () => {
    const dir = await pushDir(async (d) => {
      execFileSync("mkfifo", [join(d, "\u001b]0;x\u0007fifo")]);
    });
    const refusal = await refusalOf(dir);
    expect(refusal.message).not.toMatch(raw);
    expect(refusal.reason).toBe("UnsafeFileName");
  });
});
