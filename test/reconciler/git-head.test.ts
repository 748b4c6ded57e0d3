/**
 * The two commits of a status file: `gitCommit`, the last commit that changed the definition, and
 * `gitHead`, the commit the daemon's checkout is at. Regression: the status named only the first,
 * and nothing said which one it was. Real git repositories; git runs only once per revision and
 * when HEAD moves (a wrapper on PATH counts its runs). Run `npm run build` first.
 */
import { execFile } from "node:child_process";
import { chmod, mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { checkoutHeadOf } from "../../src/reconciler/git-commit.js";
import { commitDefinition, definitionText, readStatusFile, runShardctl, waitForStatus, writeDefinition } from "./daemon-fixture.js";
import { useDaemonWorld } from "./use-daemon-world.js";

const run = promisify(execFile);

describe("checkoutHeadOf", () => {
  let root: string;
  let log: string;
  const path = process.env.PATH;
  const git = async (...args: string[]): Promise<string> =>
    (
      await run("/usr/bin/env", ["git", "-C", root, "-c", "user.name=t", "-c", "user.email=t@example.invalid", ...args], { env: { ...process.env, PATH: path } })
    ).stdout.trim();
  /** How many times git ran for checkoutHeadOf since the last call. */
  let seen = 0;
  const gitRuns = async (): Promise<number> => {
    const all = (await readFile(log, "utf8").catch(() => "")).split("\n").filter((l) => l !== "").length;
    const runs = all - seen;
    seen = all;
    return runs;
  };

  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), "shardctl-git-head-"));
    // A git that logs each run before doing it, first on PATH for this test process only.
    const bin = join(root, "bin");
    log = join(root, "git-runs.log");
    await mkdir(bin);
    const real = (await run("sh", ["-c", "command -v git"])).stdout.trim();
    await writeFile(join(bin, "git"), `#!/bin/sh\necho "$*" >> ${JSON.stringify(log)}\nexec ${JSON.stringify(real)} "$@"\n`);
    await chmod(join(bin, "git"), 0o755);
    process.env.PATH = `${bin}:${path}`;
    await mkdir(join(root, "repo", "clusters"), { recursive: true });
    await run("git", ["init", "-q", join(root, "repo")], { env: { ...process.env, PATH: path } });
    root = join(root, "repo");
  });
  afterAll(async () => {
    process.env.PATH = path;
    await rm(join(root, ".."), { recursive: true, force: true });
  });

  test("looks git up once per revision, and again only when HEAD moved", async () => {
    const dir = join(root, "clusters");
    // A repository without commits: no HEAD commit yet, but the repository is known.
    const empty = await checkoutHeadOf(dir, "r1");
    expect(empty.commit).toBeUndefined();
    expect(await gitRuns()).toBe(1);

    await writeFile(join(dir, "a.toml"), "a = 1\n");
    await git("add", "-A");
    await git("commit", "-q", "-m", "first");
    const first = await git("rev-parse", "HEAD");
    const afterFirst = await checkoutHeadOf(dir, "r1", empty);
    expect(afterFirst.commit).toBe(first);
    expect(await gitRuns()).toBe(1);

    // Nothing moved: the same record, and git does not run (every idle resync takes this path).
    for (let i = 0; i < 5; i++) expect(await checkoutHeadOf(dir, "r1", afterFirst)).toBe(afterFirst);
    expect(await gitRuns()).toBe(0);

    // A commit that touches other files moves HEAD.
    await writeFile(join(root, "README"), "x\n");
    await git("add", "-A");
    await git("commit", "-q", "-m", "second");
    const second = await git("rev-parse", "HEAD");
    const afterSecond = await checkoutHeadOf(dir, "r1", afterFirst);
    expect(afterSecond.commit).toBe(second);
    expect(await gitRuns()).toBe(1);

    // A detached checkout, then packed refs (the branch's ref file goes away): both are noticed.
    await git("checkout", "-q", "--detach", first);
    const detached = await checkoutHeadOf(dir, "r1", afterSecond);
    expect(detached.commit).toBe(first);
    await git("checkout", "-q", "-");
    await git("pack-refs", "--all");
    const packed = await checkoutHeadOf(dir, "r1", detached);
    expect(packed.commit).toBe(second);
    expect(await gitRuns()).toBe(2);
    expect(await checkoutHeadOf(dir, "r1", packed)).toBe(packed);
    expect(await gitRuns()).toBe(0);

    // A new revision looks again, once.
    expect((await checkoutHeadOf(dir, "r2", packed)).commit).toBe(second);
    expect(await gitRuns()).toBe(1);
  });

  test("outside a repository: no commit, and no git run again until the next revision", async () => {
    const outside = await mkdtemp(join(tmpdir(), "shardctl-no-repo-"));
    try {
      const none = await checkoutHeadOf(outside, "r1");
      expect(none.commit).toBeUndefined();
      expect(await gitRuns()).toBe(1);
      expect(await checkoutHeadOf(outside, "r1", none)).toBe(none);
      expect(await gitRuns()).toBe(0);
    } finally {
      await rm(outside, { recursive: true, force: true });
    }
  });
});

describe("the status file and `shardctl status`", () => {
  const dw = useDaemonWorld();

  test("gitCommit stays the commit that changed the definition; gitHead follows the checkout", async () => {
    const { world } = dw;
    const text = definitionText(world, { nodes: ["l1", "l2"] });
    const changed = await commitDefinition(world, "g1", text);
    await waitForStatus(world, "g1", (s) => s.gitCommit === changed && s.gitHead === changed);

    // Another file is committed: the checkout moves, what changed the cluster does not.
    const git = (...args: string[]) => run("git", ["-C", world.root, "-c", "user.name=t", "-c", "user.email=t@example.invalid", ...args]);
    await writeFile(join(world.root, "NOTES"), "unrelated\n");
    await git("add", "NOTES");
    await git("commit", "-q", "-m", "unrelated");
    const head = (await git("rev-parse", "HEAD")).stdout.trim();
    // A pass at the same revision (the file rewritten as it was) notices the new HEAD.
    await writeDefinition(world, "g1", text);
    const status = await waitForStatus(world, "g1", (s) => s.gitHead === head);
    expect(status.gitCommit).toBe(changed);

    // A definition the daemon saw before it was committed gets its commit once HEAD moves.
    const later = definitionText(world, { nodes: ["l2", "l1"] });
    await writeDefinition(world, "g2", later);
    const uncommitted = await waitForStatus(world, "g2", (s) => s.gitHead === head);
    expect(uncommitted.gitCommit).toBeUndefined();
    await git("add", "clusters/g2.toml");
    await git("commit", "-q", "-m", "add g2");
    const added = (await git("rev-parse", "HEAD")).stdout.trim();
    await writeDefinition(world, "g2", later);
    await waitForStatus(world, "g2", (s) => s.gitCommit === added && s.gitHead === added);

    const shown = await runShardctl(world, ["status", "g1"]);
    expect(shown.code).toBe(0);
    expect(shown.stdout.split("\n")[0]).toMatch(
      new RegExp(`^g1 \\[cluster\\]\\s+Disabled\\s+revision [0-9a-f]{12} \\(definition commit ${changed.slice(0, 12)}, checkout at ${head.slice(0, 12)}\\)$`),
    );
    expect((await readStatusFile(world, "g1"))?.gitHead).toBe(head);

    // Edited on disk and not committed: the last commit of the file names something else than what
    // the daemon reads, so no commit is named. Regression: it named that commit.
    await writeDefinition(world, "g1", definitionText(world, { nodes: ["l2", "l1"] }));
    const edited = await waitForStatus(world, "g1", (s) => s.gitHead === added && s.gitCommit === undefined);
    expect(edited.gitCommit).toBeUndefined();

    // A commit that breaks the definition moves the checkout as any other: gitHead follows it.
    const broken = await commitDefinition(world, "g2", 'desired = "sideways"\n');
    const invalid = await waitForStatus(world, "g2", (s) => s.gitHead === broken, 20_000);
    expect(invalid.conditions.find((c) => c.type === "Stalled")?.reason).toBe("InvalidDefinition");
    // ... and it is the commit that last changed the definition. Then a broken edit not committed (a
    // merge's conflict markers): no commit names what is on disk. Regression: the last valid
    // revision's commit stayed.
    expect(invalid.gitCommit).toBe(broken);
    await writeDefinition(world, "g2", "<<<<<<< HEAD\n");
    await waitForStatus(world, "g2", (s) => s.gitCommit === undefined, 20_000);
    // Put back as committed (`git checkout -- file`, HEAD unmoved): that commit again.
    await git("checkout", "--", "clusters/g2.toml");
    await waitForStatus(world, "g2", (s) => s.gitCommit === broken, 20_000);
  });
});
