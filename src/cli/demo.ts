#!/usr/bin/env node
/**
 * The embedded demo (`npm start`): make the demo model if missing, run the daemon on this
 * repository's clusters/ with shardctl.toml (two local nodes, the reference engine, the embedded
 * router), print "ready" and how to talk to it once the demo cluster is Ready, and tear it all
 * down on Ctrl-C. Everything it writes stays under .demo/ in the working directory.
 */
import { mkdir, writeFile } from "node:fs/promises";
import { messageOf } from "../errors/index.js";
import { pathExists } from "../files/index.js";
import { dirname, join, resolve } from "node:path";
import { makeTestModel } from "../planner/index.js";
import { readStatus, requestsDirOf, startDaemon, statusFileFor } from "../reconciler/index.js";
import { computeRevision, loadCluster, loadSettings } from "../spec/index.js";
import { waitForSignal } from "./commands/daemon.js";
import { createLogger } from "./logger.js";

const settingsFile = resolve("shardctl.toml");
const clusterName = "demo";
const readyTimeoutMs = 5 * 60_000;

async function main(): Promise<number> {
  const settings = await loadSettings(settingsFile);
  const clustersDir = join(dirname(settingsFile), "clusters");
  const definition = join(clustersDir, `${clusterName}.toml`);
  const loaded = await loadCluster(definition, settings);
  if (!loaded.ok) throw new Error(`${definition} is invalid: ${loaded.issues.map((i) => i.message).join("; ")}`);
  const spec = loaded.value;

  // Make the demo model once: no model can be downloaded here.
  const modelDir = spec.model.path!;
  if (!(await pathExists(join(modelDir, "config.json")))) {
    console.log(`making the demo model in ${modelDir} …`);
    await makeTestModel(modelDir, { layers: 8, hidden: 128, heads: 4, kvHeads: 2, vocab: 512, seed: 42 });
  }

  // The embedded router's config: where it listens, and the backends list clusters join.
  const routerConfig = settings.router.config!;
  if (!(await pathExists(routerConfig))) {
    await mkdir(dirname(routerConfig), { recursive: true });
    await writeFile(
      routerConfig,
      '# The embedded router of the shardctl demo; shardctl adds and removes backends.\nserver:\n  bind_address: "127.0.0.1:8088"\nbackends: []\n',
    );
  }

  // A fresh start for the demo cluster: whatever an earlier run left in its status (a spent restart
  // budget, a Ready of processes long gone) is looked at again, as `shardctl reconcile demo` would.
  await mkdir(requestsDirOf(settings), { recursive: true });
  await writeFile(join(requestsDirOf(settings), clusterName), new Date().toISOString());

  const log = createLogger("shardctl-demo");
  const daemon = await startDaemon({ dir: clustersDir, settingsFile, log, teardownOnExit: true });
  console.log(`daemon watching ${clustersDir}; launching cluster "${clusterName}" (2 stages on this machine) …`);

  const revision = computeRevision(spec, settings);
  const stop = waitForSignal();
  const outcome = await Promise.race([waitReady(statusFileFor(definition), revision), stop.then(() => "interrupted" as const)]);
  if (outcome === "ready") {
    const url = daemon.routerUrl ?? "http://127.0.0.1:8088";
    console.log(`\ncluster "${clusterName}" is ready — serving ${spec.model.id} through the embedded router at ${url}\n`);
    console.log("talk to it:");
    console.log(`  curl -s ${url}/v1/chat/completions -H 'content-type: application/json' \\`);
    console.log(`    -d '{"model": "${spec.model.id}", "messages": [{"role": "user", "content": "Hello"}], "max_tokens": 16}'`);
    console.log("watch it:");
    console.log("  node dist/src/cli/shardctl.js status --watch demo");
    console.log("\nCtrl-C tears the demo down.");
  } else if (outcome !== "interrupted") {
    console.error(outcome);
  }
  if (outcome !== "interrupted") await stop;
  console.log("tearing the demo down …");
  await daemon.stop();
  console.log("demo stopped: no process of it is left");
  return outcome === "ready" || outcome === "interrupted" ? 0 : 1;
}

/** "ready", or a message saying why it will not be. */
async function waitReady(statusFile: string, revision: string): Promise<"ready" | string> {
  const deadline = Date.now() + readyTimeoutMs;
  let lastHealth = "";
  while (Date.now() < deadline) {
    const status = await readStatus(statusFile).catch(() => undefined);
    if (status !== undefined && status.observedRevision === revision) {
      if (status.health !== lastHealth) {
        lastHealth = status.health;
        console.log(`  ${status.health}${status.lastError ? ` (${status.lastError.reason}: ${status.lastError.message})` : ""}`);
      }
      // Ready, and converged by this daemon (an earlier run's Ready does not count).
      const ready = status.conditions.find((c) => c.type === "Ready");
      const reconciling = status.conditions.find((c) => c.type === "Reconciling");
      if (ready?.status === "True" && ready.observedRevision === revision && reconciling?.status === "False") return "ready";
      const stalled = status.conditions.find((c) => c.type === "Stalled");
      if (stalled?.status === "True") return `the demo cluster is Stalled: ${stalled.reason}: ${stalled.message}`;
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  return `the demo cluster was not ready within ${readyTimeoutMs / 1000} s; see ${statusFile}`;
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    console.error(`shardctl demo: ${messageOf(error)}`);
    process.exit(1);
  },
);
