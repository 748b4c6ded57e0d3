/**
 * A push source is copied to every node, so what it may hold is narrow: nothing outside the folder
 * (a stray symlink to a key or a password file), and no name that a terminal, a log or the push's
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

describe("links out of a push source", () => {
  it("refuses a link to a file outside the folder, naming the link and its target", async () => {
    const secret = join(root, "id_ed25519");
    await writeFile(secret, "-----BEGIN OPENSSH PRIVATE KEY-----\n");
    const dir = await pushDir((d) => symlink(secret, join(d, "tokenizer.json")));
    const refusal = await refusalOf(dir);
    expect(refusal.reason).toBe("PushSourceInvalid");
    expect(refusal.message).toContain('"tokenizer.json" is a symlink to ' + JSON.stringify(secret) + ", outside the source; copy the file into it");
  });

  it("refuses a relative link that climbs out, and one in a subfolder", async () => {
    await writeFile(join(root, "outside.json"), "{}");
    const climbing = await pushDir((d) => symlink("../outside.json", join(d, "extra.json")));
    expect(await refusalOf(climbing)).toMatchObject({ reason: "PushSourceInvalid", message: expect.stringContaining("outside the source") });
    const nested = await pushDir(async (d) => {
      await mkdir(join(d, "sub"));
      await symlink("../../outside.json", join(d, "sub", "x.json"));
    });
    expect(await refusalOf(nested)).toMatchObject({ reason: "PushSourceInvalid", message: expect.stringContaining('"sub/x.json"') });
  });

  it("follows links within the folder, and an HF cache snapshot's links into its own blobs only", async () => {
    const inside = await pushDir(async (d) => {
      await writeFile(join(d, "real.json"), "{}");
      await symlink("real.json", join(d, "alias.json"));
    });
    expect((await hashLocalManifest(inside, "org/model")).files.map((f) => f.path)).toEqual(["alias.json", "config.json", "real.json"]);

    const repo = join(root, "hf", "models--org--model");
    const snap = join(repo, "snapshots", "0123456789abcdef0123456789abcdef01234567");
    await mkdir(join(repo, "blobs"), { recursive: true });
    await mkdir(snap, { recursive: true });
    await writeFile(join(repo, "blobs", "abc"), "{}");
    await symlink("../../blobs/abc", join(snap, "config.json"));
    expect((await hashLocalManifest(snap, "org/model")).files.map((f) => f.path)).toEqual(["config.json"]);
    // Another repository's blobs are not this snapshot's.
    await mkdir(join(root, "hf", "models--other--model", "blobs"), { recursive: true });
    await writeFile(join(root, "hf", "models--other--model", "blobs", "def"), "{}");
    await symlink("../../../models--other--model/blobs/def", join(snap, "tokenizer.json"));
    expect(await refusalOf(snap)).toMatchObject({ reason: "PushSourceInvalid", message: expect.stringContaining("outside the source") });
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
