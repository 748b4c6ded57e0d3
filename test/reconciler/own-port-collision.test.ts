/**
 * An engine that opens a port of its own besides the one it is given, and that port is one shardctl
 * handed to another process of the same launch (here stage-0 also listens on the coordinator's
 * control address, as an engine's metrics port at "its port + 1" can): the coordinator cannot bind,
 * and the failure says which process of the launch holds its port and what to do. It is the engine's
 * own failure, counted against the restart budget (a retry would collide again), never PortInUse,
 * which is retried uncounted for ever. The daemon runs in this process on two local nodes.
 */
import { chmod, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { expect, test } from "vitest";
import { bundledShardEngineCommand } from "../../src/launch/index.js";
import { waitForStatus } from "./daemon-fixture.js";
import { useDaemonWorld } from "./use-daemon-world.js";

const dw = useDaemonWorld({ settings: { enabled: true, restartBudget: 2 } });

test("stage-0 also listens on the coordinator's control address: CoordinatorExited naming stage-0 of the same launch, counted, then Stalled", async () => {
  const { world } = dw;
  const engine = bundledShardEngineCommand.map((arg) => JSON.stringify(arg)).join(" ");
  const greedy = join(world.root, "greedy-ports.sh");
  // As stage-0: read the coordinator's control address from the cluster file, listen there too (a
  // child in the engine's process group), then become the engine.
  await writeFile(
    greedy,
    `#!/bin/sh
case " $* " in *" --node-id stage-0 "*)
  config=$(printf '%s\\n' "$@" | grep 'cluster.toml$' | head -n 1)
  address=$(awk '/id = "coordinator"/ { found = 1 } found && /address/ { gsub(/.*= *"|"/, ""); print; exit }' "$config")
  ${JSON.stringify(process.execPath)} -e 'const [h, p] = process.argv[1].split(":"); require("node:net").createServer().listen(Number(p), h)' "$address" &
  sleep 0.5 ;;
esac
exec ${engine} "$@"
`,
  );
  await chmod(greedy, 0o755);
  await dw.define("greedy", { nodes: ["l1", "l2"], coordinatorNode: "l1", binary: greedy });
  const stalled = await waitForStatus(world, "greedy", (s) => s.health === "Stalled", 120_000);
  const failures = stalled.restarts!.evidence;
  expect(failures.length).toBe(2);
  for (const failure of failures) {
    expect(failure.reason).toBe("CoordinatorExited");
    expect(failure.message).toContain("by stage-0 of this same launch, which listens there besides the address shardctl gave it");
  }
}, 180_000);
