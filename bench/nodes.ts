/**
 * `npm run bench -- nodes [--listeners N] [--rounds N]`: what the daemon asks a node, at a busy
 * machine's scale. Every launch and teardown looks for what an earlier launch of the cluster left
 * listening (its command line names the launch's files) among every TCP listener of the node:
 *   - N listeners (default 150: small perl processes on loopback), one of them naming the launch's
 *     cluster config;
 *   - the look as shardctl asks it (`listenersNaming`, one grep over the listeners' command lines)
 *     against the way it used to ask, started in the same run as the baseline: one `ps` per
 *     listener. Both must find the same process; the median of R rounds (default 7) each, ms, and
 *     the ratio.
 * And the liveness question the health monitor asks of every local process each second (its start
 * time): read from /proc in the daemon's process against a shell started for it (as on an SSH
 * node), 200 questions each, ms per question; both must give the same answer.
 */
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { promisify } from "node:util";
import { listenersNaming, LocalNode, startTimeFunction, startTimeScript } from "../src/nodes/index.js";
import { intArg } from "./args.js";
import { median, round } from "./completion-timing.js";

const run_ = promisify(execFile);

/** The look as it was: `ps` started once per listening process (the baseline). */
const perListenerPsScript = `${startTimeFunction}
pids=$(ss -Htlnp 2>/dev/null | grep -o 'pid=[0-9]*' | cut -d= -f2 | sort -u)
for pid in $pids; do
  args=$(ps -ww -o args= -p "$pid" 2>/dev/null) || continue
  hit=
  for path; do case $args in *"$path"*) hit=1; break ;; esac; done
  [ -n "$hit" ] || continue
  t=$(st "$pid")
  [ -n "$t" ] || continue
  printf '%s\\t%s\\t%s\\n' "$pid" "$t" "$args"
done
exit 0`;

/** A listener on 127.0.0.1 in its own small process; `tag` goes on its command line. */
function startListener(tag: string): ChildProcess {
  const program = 'use IO::Socket::INET; my $s = IO::Socket::INET->new(LocalAddr => "127.0.0.1", LocalPort => 0, Listen => 1) or die; print "up\\n"; $| = 1; sleep 600;';
  return spawn("perl", ["-e", program, tag], { stdio: ["ignore", "pipe", "ignore"] });
}

function whenUp(child: ChildProcess): Promise<void> {
  return new Promise((resolve, reject) => {
    child.stdout!.once("data", () => resolve());
    child.once("exit", (code) => reject(new Error(`a listener exited (${code}) before it listened`)));
  });
}

export async function run(args: string[]): Promise<object> {
  const count = intArg(args, "--listeners", 150);
  const rounds = intArg(args, "--rounds", 7);
  const runDir = "/var/lib/shardctl/run/bench-cluster";
  const paths = [`${runDir}/cluster.toml`, `${runDir}/hostfile.json`];
  const children = [startListener(paths[0]!), ...Array.from({ length: count - 1 }, (_, i) => startListener(`/srv/other-${i}/config.toml`))];
  try {
    await Promise.all(children.map(whenUp));
    const node = new LocalNode({ name: "local", host: "local", port: 22, hostKeyPolicy: "strict", modelDir: "/" });
    const listening = (await run_("sh", ["-c", "ss -Htlnp | grep -o 'pid=[0-9]*' | sort -u | wc -l"])).stdout.trim();
    const now: number[] = [];
    const before: number[] = [];
    let found: number[] = [];
    let foundBefore: number[] = [];
    for (let round = 0; round < rounds; round++) {
      let t = performance.now();
      found = (await listenersNaming(node, paths, { deadlineMs: 60_000 })).map((l) => l.pid);
      now.push(performance.now() - t);
      t = performance.now();
      const { stdout } = await run_("sh", ["-c", perListenerPsScript, "sh", ...paths], { maxBuffer: 1 << 20 });
      before.push(performance.now() - t);
      foundBefore = stdout
        .split("\n")
        .filter((line) => line !== "")
        .map((line) => Number(line.split("\t")[0]));
    }
    const expected = [children[0]!.pid!];
    if (JSON.stringify(found) !== JSON.stringify(expected) || JSON.stringify(foundBefore) !== JSON.stringify(expected)) {
      throw new Error(`the looks disagree: expected pid ${expected[0]}, found ${found.join(",") || "none"} now and ${foundBefore.join(",") || "none"} the way it was`);
    }
    const nowMs = median(now);
    const beforeMs = median(before);
    const liveness = await measureLocalLiveness(node, children[0]!.pid!);
    return {
      listenersOnMachine: Number(listening),
      rounds,
      leftoverListenerLook: {
        ms: round(nowMs, 1),
        perListenerPsMs: round(beforeMs, 1),
        // Baseline ÷ now: how many times faster the look is.
        speedup: round(beforeMs / nowMs, 1),
        deadlineMs: 2_000,
      },
      localLivenessQuestion: liveness,
    };
  } finally {
    for (const child of children) child.kill("SIGKILL");
  }
}

/** Per question, ms: the local node's own read of /proc against a shell started for each, interleaved. */
async function measureLocalLiveness(node: LocalNode, pid: number): Promise<object> {
  const questions = 200;
  let read = 0;
  let shell = 0;
  for (let i = 0; i < questions; i++) {
    let t = performance.now();
    const mine = await node.processStartTime(pid);
    read += performance.now() - t;
    t = performance.now();
    const theirs = (await run_("sh", ["-c", startTimeScript, "sh", String(pid)])).stdout.trim();
    shell += performance.now() - t;
    if (mine !== theirs) throw new Error(`the start times disagree: ${String(mine)} read, ${theirs} from the shell`);
  }
  return { questions, readMs: round(read / questions), shellMs: round(shell / questions), speedup: round(shell / read, 1) };
}
