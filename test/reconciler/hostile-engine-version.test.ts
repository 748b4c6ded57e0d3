/**
 * An engine's `--version` is text its author chose, and shardctl quotes it: in the plan's messages,
 * the status file, the daemon's log and `shardctl nodes`. One that prints a line of megabytes must
 * not make the status file too large for `shardctl status` and `wait` to read (their cap is 16 MiB),
 * nor the log's lines and the nodes table as large: the version is kept to 200 characters, and every
 * message of a status file to 4096.
 */
import { chmod, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { expect, test } from "vitest";
import { bundledShardEngineCommand } from "../../src/launch/index.js";
import { conditionOf, runShardctl, waitForStatus } from "./daemon-fixture.js";
import { useDaemonWorld } from "./use-daemon-world.js";

const dw = useDaemonWorld({ settings: { enabled: true } });

test("a version line of 4 MiB: the refusal quotes 200 characters of it, the status file stays small and readable", async () => {
  const { world } = dw;
  const engine = bundledShardEngineCommand.map((arg) => JSON.stringify(arg)).join(" ");
  const huge = join(world.root, "huge-version.sh");
  await writeFile(
    huge,
    `#!/bin/sh\ncase " $* " in *" --version "*) printf 'mlxcel-server '; head -c 4194304 /dev/zero | tr '\\0' 9; echo; exit 0 ;; esac\nexec ${engine} "$@"\n`,
  );
  await chmod(huge, 0o755);
  await dw.define("vers", { nodes: ["l1", "l2"], binary: huge, version: "0.9.1" });
  const refused = await waitForStatus(world, "vers", (s) => s.lastError?.reason === "EngineVersionMismatch", 60_000);
  const message = conditionOf(refused, "Stalled")?.message ?? refused.lastError!.message;
  expect(message).toContain("mlxcel-server 9999");
  expect(message).toContain("… (cut to 200 characters)");
  expect(message.length).toBeLessThan(4200);
  expect((await stat(join(world.clustersDir, "vers.status.json"))).size).toBeLessThan(64 * 1024);
  const shown = await runShardctl(world, ["status", "vers"]);
  expect(shown.code).toBe(0);
  expect(shown.stdout).toContain("EngineVersionMismatch");
  const nodes = await runShardctl(world, ["nodes", "--engine-binary", huge]);
  expect(nodes.stdout.length).toBeLessThan(16 * 1024);
  expect(nodes.stdout).toContain("… (cut to 200 characters)");
}, 120_000);
