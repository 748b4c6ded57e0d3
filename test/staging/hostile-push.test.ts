/**
 * A push source is copied to every node, so what it may hold is narrow: regular files (links are
 * followed to regular files, wherever they lead, but inside a git repository only within it), and no name that a terminal, a log or the push's
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

describe("a push source inside a git repository (links committed there are anyone's who can commit)", () => {
  /** A repository (its .git, as `git init` makes it) holding a push folder `models/m`, and a secret outside it. */
  async function repository(): Promise<{ repo: string; dir: string; secret: string }> {
    const repo = join(root, `repo-${++counter}`);
    execFileSync("git", ["init", "-q", repo]);
    const dir = join(repo, "models", "m");
    await mkdir(dir, { recursive: true });
    await writeFile(join(dir, "config.json"), "{}");
    const secret = join(root, `secret-${counter}`);
    await writeFile(secret, "root:$6$hash:19000:0:99999:7:::\n", { mode: 0o640 });
    return { repo, dir, secret };
  }

  it("refuses a link to a file outside the repository, naming both, and stages nothing", async () => {
    const { repo, dir, secret } = await repository();
    await symlink(secret, join(dir, "leak.json"));
    const refusal = await refusalOf(dir);
    expect(refusal.reason).toBe("PushSourceInvalid");
    expect(refusal.message).toBe(
      `the push source ${dir}: leak.json links to ${secret}, outside the git repository ${repo} that holds the folder: links committed to a repository must not reach other files of this machine; copy the file into the folder, or keep the model outside the repository`,
    );
  });

  it("refuses a push folder that is itself a link out of the repository", async () => {
    const { repo, secret } = await repository();
    const outside = join(root, `outside-${counter}`);
    await mkdir(outside);
    await writeFile(join(outside, "config.json"), "{}");
    await symlink(secret, join(outside, "leak.json"));
    const linked = join(repo, "models", "linked");
    await symlink(outside, linked);
    expect(await refusalOf(linked)).toMatchObject({
      reason: "PushSourceInvalid",
      message: expect.stringContaining(`the push source ${linked} is a link to ${outside}, outside the git repository ${repo}`),
    });
  });

  it("follows links that stay inside the repository", async () => {
    const { repo, dir } = await repository();
    await mkdir(join(repo, "blobs"));
    await writeFile(join(repo, "blobs", "weights"), "weights");
    await symlink(join("..", "..", "blobs", "weights"), join(dir, "model.safetensors"));
    const manifest = await hashLocalManifest(dir, "org/model");
    expect(manifest.files.map((f) => [f.path, f.size])).toEqual([
      ["config.json", 2],
      ["model.safetensors", 7],
    ]);
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

  it("refuses a name that is not UTF-8 (in a subfolder too), showing its bytes, not a bare ENOENT", async () => {
    const dir = await pushDir(async (d) => {
      await mkdir(join(d, "extra"));
      await writeFile(Buffer.from(`${join(d, "extra")}/bad\xffname.txt`, "latin1"), "x");
    });
    const refusal = await refusalOf(dir);
    expect(refusal.reason).toBe("UnsafeFileName");
    expect(refusal.message).toContain(`the push source ${dir} holds a file name that is not UTF-8: extra/bad\\xffname.txt;`);
    expect(refusal.message).toContain("rename it or remove it, then run shardctl reconcile <cluster>");
  });

  it("refuses a FIFO whose name is a terminal sequence without echoing the sequence", async () => {
    const dir = await pushDir(async (d) => {
      execFileSync("mkfifo", [join(d, "\u001b]0;x\u0007fifo")]);
    });
    const refusal = await refusalOf(dir);
    expect(refusal.message).not.toMatch(raw);
    expect(refusal.reason).toBe("UnsafeFileName");
  });
});
