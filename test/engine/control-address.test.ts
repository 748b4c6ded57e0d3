/**
 * The coordinator's control address (its node in the cluster file), as mlxcel uses it: the
 * coordinator binds it, apart from its HTTP listener, and the last stage dials it with its results.
 * So it must be the coordinator machine's own address, one the stages reach: a coordinator that
 * cannot bind it exits naming it, and a last stage that cannot reach it exits naming it.
 */
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { makeTestModel } from "../../src/planner/test-model/index.js";
import { freePort, killAll, nextHost, postJson, requireBuild, spawnEngine, startCluster, waitListening, writeClusterToml } from "./support.js";

let dir: string;
let modelDir: string;

beforeAll(async () => {
  requireBuild();
  dir = await mkdtemp(join(tmpdir(), "engine-control-"));
  modelDir = join(dir, "m");
  await makeTestModel(modelDir, { layers: 4, hidden: 64, seed: 5 });
});
afterAll(async () => {
  await killAll();
  await rm(dir, { recursive: true, force: true });
});

function accepts(address: { host: string; port: number }): Promise<boolean> {
  return new Promise((done) => {
    const socket = connect(address.port, address.host);
    socket.once("connect", () => {
      socket.destroy();
      done(true);
    });
    socket.once("error", () => done(false));
  });
}

/** The cluster file's coordinator node, moved to `address`. */
async function withCoordinatorAt(file: string, address: string): Promise<string> {
  const moved = join(dir, `moved-${address.replace(/[^0-9]/g, "-")}.toml`);
  const text = await readFile(file, "utf8");
  await writeFile(moved, text.replace(/^address = "[^"]+"(\nrole = "hybrid")/m, `address = "${address}"$1`));
  return moved;
}

describe("the coordinator's control address", () => {
  it("is bound by the coordinator on its own host, apart from HTTP, and carries the last stage's results", async () => {
    const httpHost = await nextHost();
    const cluster = await startCluster(modelDir, { stages: 2, dir, httpHost });
    const { coordinator } = await readCoordinatorAddress(cluster.file);
    expect(coordinator.host).not.toBe(httpHost);
    expect(await accepts(coordinator)).toBe(true);
    expect(cluster.coordinator.stderr()).toMatch(/last stage connected to the control address/);
    expect(cluster.stages[1]!.stderr()).toMatch(/connected to the coordinator's control address/);
    const r = await postJson(`${cluster.baseUrl}/v1/completions`, { prompt: "hello", max_tokens: 3 });
    expect(r.status).toBe(200);
    await cluster.stop();
  });

  it("a coordinator whose control address is not its machine's exits, naming the address", async () => {
    const layout = await writeClusterToml({ stages: 1, dir });
    // TEST-NET-3: no interface of this machine has it.
    const file = await withCoordinatorAt(layout.file, "203.0.113.1:39600");
    const host = await nextHost();
    const coordinator = spawnEngine(["-m", modelDir, "--distributed-config", file, "--node-id", "coordinator", "--host", host, "--port", String(await freePort(host))]);
    expect(await coordinator.exited).toBe(1);
    expect(coordinator.stderr()).toContain("cannot bind the control address 203.0.113.1:39600");
  });

  it("a last stage that cannot reach the control address exits naming it, and the pipeline never forms", async () => {
    const layout = await writeClusterToml({ stages: 1, dir });
    // The stage is told another address than the one the coordinator binds: as a stage on another
    // machine dials a control address of 127.0.0.1, and finds its own loopback.
    const elsewhere = await nextHost();
    const stageFile = await withCoordinatorAt(layout.file, `${elsewhere}:${await freePort(elsewhere)}`);
    const stage = spawnEngine([
      "-m",
      modelDir,
      "--distributed-config",
      stageFile,
      "--node-id",
      "stage-0",
      "--host",
      "127.0.0.1",
      "--port",
      "1",
      "--connect-timeout-ms",
      "800",
    ]);
    await waitListening(layout.stages[0]!, stage);
    const host = await nextHost();
    const coordinator = spawnEngine([
      "-m",
      modelDir,
      "--distributed-config",
      layout.file,
      "--node-id",
      "coordinator",
      "--host",
      host,
      "--port",
      String(await freePort(host)),
      "--connect-timeout-ms",
      "1500",
    ]);
    expect(await stage.exited).toBe(1);
    expect(stage.stderr()).toMatch(/cannot reach the next stage/);
    expect(stage.stderr()).toContain(`"host":"${elsewhere}"`);
    expect(await coordinator.exited).toBe(1);
  });
});

/** The coordinator's address as the cluster file gives it. */
async function readCoordinatorAddress(file: string): Promise<{ coordinator: { host: string; port: number } }> {
  const text = await readFile(file, "utf8");
  const match = /^address = "([^"]+):(\d+)"\nrole = "hybrid"/m.exec(text);
  if (match === null) throw new Error(`no coordinator node in ${file}`);
  return { coordinator: { host: match[1]!, port: Number(match[2]) } };
}
