/**
 * A command that does not finish while its node answers (a file system it touches hangs: a frozen
 * network mount, a failing disk) is said to have hung there, not taken for a node out of reach: an
 * SSH connection that stays up past the keepalive bound is a node that answers. A node gone silent
 * (its sshd and sessions stopped) still times out with no such word. A real sshd node and this
 * machine.
 */
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { afterAll, beforeAll, expect, it } from "vitest";
import { isShardctlError } from "../../src/errors/index.js";
import { commandFailed, type CommandResult } from "../../src/nodes/index.js";
import { startBothNodes, type BothNodes } from "../support/both-nodes.js";

const run = promisify(execFile);
let both: BothNodes;

beforeAll(async () => {
  both = await startBothNodes("shardctl-hung-command-");
}, 60_000);

afterAll(async () => {
  await both?.close();
});

const hungWords =
  /^node n1: stat files timed out after \d+ ms, though the node answered all along: the command itself did not finish \(a file system it touches may hang/;

it.each(["local", "ssh"] as const)("%s: a command that hangs on a node that answers is said to hang there", async (kind) => {
  const node = both.node(kind);
  await node.run(["true"]);
  // Over SSH, longer than the keepalive bound (4 s), within which a silent node's connection drops.
  const hung = await node.run(["sleep", "30"], { deadlineMs: kind === "local" ? 1_000 : 5_000 });
  expect(hung.timedOut).toBe(true);
  expect(hung.nodeAnswered).toBe(true);
  expect(commandFailed("n1", "NodeUnreachable", "stat files", hung).message).toMatch(hungWords);
});

it("ssh: a node gone silent (its sshd and sessions stopped) times out with no word of a hang", async () => {
  const node = both.node("ssh");
  await node.run(["true"]);
  const listener = both.sshd.nodes[0]!.pid!;
  const sessions = (await run("pgrep", ["-P", String(listener)]).catch(() => ({ stdout: "" }))).stdout.split("\n").filter((p) => p !== "");
  const frozen = [String(listener), ...sessions];
  await run("kill", ["-STOP", ...frozen]);
  try {
    // The keepalives drop the connection within their bound: the question fails then, as unreachable,
    // or reaches its deadline while a new connection is tried; either way no hang is said.
    const silent = await node.run(["true"], { deadlineMs: 7_000 }).catch((error: unknown) => error);
    if (silent instanceof Error) {
      expect(isShardctlError(silent, "NodeUnreachable"), silent.message).toBe(true);
      expect(silent.message).not.toMatch(/answered all along/);
    } else {
      const result = silent as CommandResult;
      expect(result.timedOut).toBe(true);
      expect(result.nodeAnswered).toBeUndefined();
      expect(commandFailed("n1", "NodeUnreachable", "stat files", result).message).not.toMatch(/answered all along/);
    }
  } finally {
    await run("kill", ["-CONT", ...frozen]);
  }
});
