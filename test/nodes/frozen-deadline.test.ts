/**
 * A question to a node whose answer arrived while the daemon itself was frozen (stopped, a paused
 * VM) is answered, not timed out: the deadline's timer is due at once when the process resumes and
 * runs before the answer waiting in the socket is read. Regression: a daemon stopped for 75 s in a
 * launch failed it as NodeUnreachable, "start timed out after 75065 ms", naming a node that had
 * answered in milliseconds. A real SSH node; the freeze is this process's own main thread held for
 * 4 s. A question that goes unanswered still times out on time, on a local node and an SSH one.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startBothNodes, type BothNodes } from "../support/both-nodes.js";

let both: BothNodes;

beforeAll(async () => {
  both = await startBothNodes("shardctl-frozen-deadline-");
}, 60_000);

afterAll(async () => {
  await both?.close();
});

/** Hold this process's event loop for `ms`, as SIGSTOP would. */
function freeze(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

it("an SSH question whose round trips a freeze longer than its deadline held up is answered", async () => {
  const node = both.node("ssh");
  await node.run(["true"]);
  // Asked, then frozen at once: the channel's opening, the command and its output are round trips
  // the event loop makes after the freeze, when the deadline is already past.
  const question = node.run(["sh", "-c", "echo answered"], { deadlineMs: 1_500 });
  freeze(4_000);
  const result = await question;
  expect(result.timedOut ?? false).toBe(false);
  expect(result.exitCode).toBe(0);
  expect(result.stdout.trim()).toBe("answered");
});

describe.each(["local", "ssh"] as const)("%s node", (kind) => {
  it("a question without an answer times out at its deadline", async () => {
    const started = Date.now();
    const result = await both.node(kind).run(["sleep", "10"], { deadlineMs: 600 });
    expect(result.timedOut).toBe(true);
    expect(Date.now() - started).toBeLessThan(2_500);
  });
});
