/**
 * What a launch binds: engines want IP addresses, so an ssh config alias is resolved to its
 * HostName; an engine whose transport is IPv4 only (mlx-lm: MLX's ring exits with "Can't parse
 * address" on an IPv6 one) gets IPv4 addresses or a refusal before anything starts.
 */
import { execFileSync } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { networkInterfaces, tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, test } from "vitest";
import { LocalNode, NodePool } from "../../src/nodes/index.js";
import { makeTestModel, planCluster } from "../../src/planner/index.js";
import { buildLaunchRequest, nodeConfigOf } from "../../src/cluster/index.js";
import { controlHostOf } from "../../src/cluster/control-host.js";
import { parseCluster, parseSettings } from "../../src/spec/index.js";

let root: string;
let pool: NodePool;

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), "shardctl-launch-request-"));
  await makeTestModel(join(root, "model"), { layers: 4 });
  await makeTestModel(join(root, "qwen"), { family: "qwen2", layers: 4 });
  await writeFile(
    join(root, "ssh_config"),
    [
      "Host studio-a\n  HostName 127.0.0.7\n  User ops",
      "Host studio-v6\n  HostName ::1\n  User ops",
      "Host mapped\n  HostName ::FFFF:127.0.0.9",
      "Host longhand\n  HostName 0:0:0:0:0:0:0:1",
      "Host zoned\n  HostName fe80::2cf9:1cff:fe17:28d9%%eth0",
      "Host link-local\n  HostName fe80::1",
      "",
    ].join("\n"),
  );
  pool = new NodePool({ sshConfigPath: join(root, "ssh_config"), knownHostsPath: join(root, "known_hosts") });
});

afterAll(async () => {
  await pool?.close();
  await rm(root, { recursive: true, force: true });
});

test("stages bind their node's address: an alias's HostName, an IP as written, loopback for local nodes", async () => {
  const settingsText = [
    "[nodes.a]",
    'host = "studio-a"',
    `model_dir = "${join(root, "a")}"`,
    'memory = "4GiB"',
    "[nodes.b]",
    'host = "127.0.0.8"',
    `model_dir = "${join(root, "b")}"`,
    'memory = "4GiB"',
    "[nodes.c]",
    'host = "local"',
    'model_dir = "c"',
    'memory = "4GiB"',
  ].join("\n");
  const settings = parseSettings(settingsText, join(root, "shardctl.toml"));
  if (!settings.ok) throw new Error(JSON.stringify(settings.issues));
  const cluster = parseCluster(
    `nodes = ["a", "b", "c"]\n[model]\nid = "${join(root, "model")}"\nsource = "push"\n[engine]\nkind = "reference"\n`,
    join(root, "clusters", "x.toml"),
    settings.value,
  );
  if (!cluster.ok) throw new Error(JSON.stringify(cluster.issues));
  const spec = cluster.value;
  const { plan } = await planCluster(spec, settings.value);
  const stages = spec.nodes.map((n) => {
    const config = nodeConfigOf(settings.value.nodes[n]!);
    return config.host === "local" ? new LocalNode(config) : pool.get(config);
  });
  const coordinator = new LocalNode({ name: "local", host: "local", modelDir: join(root, "state") });
  const modelPaths = new Map([...spec.nodes, "local"].map((n) => [n, join(root, "model")]));
  const request = await buildLaunchRequest(spec, settings.value, "rev", plan, { stages, coordinator }, modelPaths);
  expect(request.stages.map((s) => [s.nodeName, s.bindHost])).toEqual([
    ["a", "127.0.0.7"],
    ["b", "127.0.0.8"],
    ["c", "127.0.0.1"],
  ]);
  expect(request.stages.map((s) => s.runDir)).toEqual([join(root, "a", ".shardctl/run/x"), join(root, "b", ".shardctl/run/x"), join(root, "c", ".shardctl/run/x")]);
});

test("stages sharing a machine divide its cores: each of k gets ⌊cores ÷ k⌋ threads; a stage alone keeps the engine's default", async () => {
  const settingsText = ["a", "b"]
    .map((n) => `[nodes.${n}]\nhost = "local"\nmodel_dir = "${join(root, n)}"\nmemory = "4GiB"`)
    .concat([`[nodes.c]\nhost = "127.0.0.8"\nmodel_dir = "${join(root, "c")}"\nmemory = "4GiB"`])
    .join("\n");
  const settings = parseSettings(settingsText, join(root, "shardctl.toml"));
  if (!settings.ok) throw new Error(JSON.stringify(settings.issues));
  const cluster = parseCluster(
    `nodes = ["a", "b", "c"]\n[model]\nid = "${join(root, "model")}"\nsource = "push"\n[engine]\nkind = "reference"\n`,
    join(root, "clusters", "y.toml"),
    settings.value,
  );
  if (!cluster.ok) throw new Error(JSON.stringify(cluster.issues));
  const spec = cluster.value;
  const { plan } = await planCluster(spec, settings.value);
  expect(plan.warnings.filter((w) => w.reason === "StagesShareMachine").map((w) => w.message)).toEqual([
    expect.stringContaining("stages 0 (a), 1 (b) run on this machine and share its cores"),
  ]);
  const stages = spec.nodes.map((n) => {
    const config = nodeConfigOf(settings.value.nodes[n]!);
    return config.host === "local" ? new LocalNode(config) : pool.get(config);
  });
  const coordinator = new LocalNode({ name: "local", host: "local", modelDir: join(root, "state") });
  const modelPaths = new Map([...spec.nodes, "local"].map((n) => [n, join(root, "model")]));
  const request = await buildLaunchRequest(spec, settings.value, "rev", plan, { stages, coordinator }, modelPaths);
  const cores = Number(execFileSync("getconf", ["_NPROCESSORS_ONLN"], { encoding: "utf8" }).trim());
  const share = Math.max(1, Math.floor(cores / 2));
  expect(request.stages.map((s) => s.threads)).toEqual([share, share, undefined]);
});

test("mlx-lm refuses a node whose address is IPv6, before anything starts: MLX's ring parses IPv4 only", async () => {
  const settingsText = [
    "[nodes.a]",
    'host = "studio-v6"',
    `model_dir = "${join(root, "a")}"`,
    'memory = "4GiB"',
    "[nodes.b]",
    'host = "localhost"',
    `model_dir = "${join(root, "b")}"`,
    'memory = "4GiB"',
  ].join("\n");
  const settings = parseSettings(settingsText, join(root, "shardctl.toml"));
  if (!settings.ok) throw new Error(JSON.stringify(settings.issues));
  const definition = (kind: string) =>
    parseCluster(
      `nodes = ["a", "b"]\n[model]\nid = "${join(root, "qwen")}"\nsource = "push"\n[engine]\nkind = "${kind}"\n`,
      join(root, "clusters", "r.toml"),
      settings.value,
    );
  const stages = ["a", "b"].map((n) => pool.get(nodeConfigOf(settings.value.nodes[n]!)));
  const coordinator = new LocalNode({ name: "local", host: "local", modelDir: join(root, "state") });
  const modelPaths = new Map(["a", "b", "local"].map((n) => [n, join(root, "qwen")]));

  const ring = definition("mlx-lm");
  if (!ring.ok) throw new Error(JSON.stringify(ring.issues));
  const { plan } = await planCluster(ring.value, settings.value);
  const refused = buildLaunchRequest(ring.value, settings.value, "rev", plan, { stages, coordinator }, modelPaths);
  await expect(refused).rejects.toMatchObject({ reason: "NodeAddressNotIPv4", terminal: true });
  await expect(refused).rejects.toThrow(/^node a: mlx-lm connects its processes over IPv4 only, and its host is the IPv6 address ::1: /);

  // The same nodes for an engine that takes any IP: the IPv6 address as written.
  const reference = definition("reference");
  if (!reference.ok) throw new Error(JSON.stringify(reference.issues));
  const request = await buildLaunchRequest(
    reference.value,
    settings.value,
    "rev",
    (await planCluster(reference.value, settings.value)).plan,
    { stages, coordinator },
    modelPaths,
  );
  expect(request.stages.map((s) => s.bindHost)).toEqual(["::1", "127.0.0.1"]);
});

test("the coordinator's control address is its node's own address, whatever host its HTTP listener binds", async () => {
  const settingsText = [
    "[nodes.a]",
    'host = "studio-a"',
    `model_dir = "${join(root, "a")}"`,
    'memory = "4GiB"',
    "[nodes.b]",
    'host = "127.0.0.8"',
    `model_dir = "${join(root, "b")}"`,
    'memory = "4GiB"',
    "[nodes.c]",
    'host = "192.0.2.20"',
    `model_dir = "${join(root, "c")}"`,
    'memory = "4GiB"',
  ].join("\n");
  const settings = parseSettings(settingsText, join(root, "shardctl.toml"));
  if (!settings.ok) throw new Error(JSON.stringify(settings.issues));
  const definition = (coordinator: string) =>
    parseCluster(
      `nodes = ["a"]\n[model]\nid = "${join(root, "model")}"\nsource = "push"\n[engine]\nkind = "reference"\n${coordinator}`,
      join(root, "clusters", "z.toml"),
      settings.value,
    );
  const stages = [pool.get(nodeConfigOf(settings.value.nodes.a!))];
  const modelPaths = new Map(["a", "b", "local"].map((n) => [n, join(root, "model")]));

  // On node b, HTTP on every interface: the stages dial b's address, never the wildcard.
  const onB = definition('[coordinator]\nnode = "b"\nhost = "0.0.0.0"\nport = 8080\n');
  if (!onB.ok) throw new Error(JSON.stringify(onB.issues));
  const { plan } = await planCluster(onB.value, settings.value);
  const b = pool.get(nodeConfigOf(settings.value.nodes.b!));
  const request = await buildLaunchRequest(onB.value, settings.value, "rev", plan, { stages, coordinator: b }, modelPaths);
  expect([request.coordinator.bindHost, request.coordinator.controlHost]).toEqual(["0.0.0.0", "127.0.0.8"]);
  // The daemon's probes and the router dial b's address too: a wildcard is bound, never dialled.
  expect(request.coordinator.urlHost).toBe("127.0.0.8");

  // On a node the control machine reaches at another address than loopback, an API on its
  // loopback is out of the daemon's and the router's reach: refused, saying what to set.
  const onC = definition('[coordinator]\nnode = "c"\nhost = "127.0.0.1"\nport = 8080\n');
  if (!onC.ok) throw new Error(JSON.stringify(onC.issues));
  // TEST-NET-1: never contacted, the refusal comes first.
  const c = pool.get({ name: "c", host: "192.0.2.20", port: 22, hostKeyPolicy: "strict", modelDir: join(root, "c") });
  const refused = buildLaunchRequest(onC.value, settings.value, "rev", plan, { stages, coordinator: c }, modelPaths);
  await expect(refused).rejects.toMatchObject({ reason: "CoordinatorHostUnreachable", terminal: true });
  await expect(refused).rejects.toThrow(
    /^\[coordinator\] host 127\.0\.0\.1 is the loopback of node c \(192\.0\.2\.20\), which the daemon and the router .* set it to the node's address \(192\.0\.2\.20\) or 0\.0\.0\.0/,
  );

  // On this machine with its stages on this machine too: loopback, as for a local stage.
  const local = definition("");
  if (!local.ok) throw new Error(JSON.stringify(local.issues));
  const here = new LocalNode({ name: "local", host: "local", modelDir: join(root, "state") });
  const localStages = [new LocalNode({ name: "a", host: "local", modelDir: join(root, "a") })];
  const request2 = await buildLaunchRequest(local.value, settings.value, "rev", plan, { stages: localStages, coordinator: here }, modelPaths);
  expect([request2.coordinator.bindHost, request2.coordinator.controlHost]).toEqual(["127.0.0.1", "127.0.0.1"]);
});

test("a coordinator on this machine with a stage elsewhere: the address this machine reaches that stage from, or a refusal", async () => {
  const here = new LocalNode({ name: "local", host: "local", modelDir: join(root, "state") });
  // TEST-NET-1: reached by the default route, when this machine has one.
  const chosen = controlHostOf(here, "127.0.0.1", ["127.0.0.1", "192.0.2.1"]);
  const own = Object.values(networkInterfaces()).flatMap((list) => (list ?? []).map((i) => i.address));
  await chosen.then(
    (address) => {
      expect(own).toContain(address);
      expect(address.startsWith("127.")).toBe(false);
    },
    (error: unknown) => expect(error).toMatchObject({ reason: "NodeAddressUnresolved", message: expect.stringContaining("no route to 192.0.2.1") }),
  );
  // A coordinator on a registered node keeps that node's address.
  const registered = pool.get({ name: "b", host: "127.0.0.8", port: 22, hostKeyPolicy: "strict", modelDir: join(root, "b") });
  expect(await controlHostOf(registered, "127.0.0.8", ["192.0.2.1"])).toBe("127.0.0.8");
});

/** The settings of one local node "a", for the `[engine]` tests below. */
function oneNodeSettings() {
  const settings = parseSettings(`[nodes.a]\nhost = "local"\nmodel_dir = "${join(root, "a")}"\nmemory = "4GiB"`, join(root, "shardctl.toml"));
  if (!settings.ok) throw new Error(JSON.stringify(settings.issues));
  return settings;
}

/** The launch request of a one-node reference cluster whose `[engine]` table also holds `engine` (TOML lines). */
async function requestWith(engine: string) {
  const settings = oneNodeSettings();
  const cluster = parseCluster(
    `nodes = ["a"]\n[model]\nid = "${join(root, "model")}"\nsource = "push"\n[engine]\nkind = "reference"\n${engine}`,
    join(root, "clusters", "x.toml"),
    settings.value,
  );
  if (!cluster.ok) throw new Error(JSON.stringify(cluster.issues));
  const { plan } = await planCluster(cluster.value, settings.value);
  const node = new LocalNode(nodeConfigOf(settings.value.nodes.a!));
  const modelPaths = new Map(["a", "local"].map((n) => [n, join(root, "model")]));
  return buildLaunchRequest(cluster.value, settings.value, "rev", plan, { stages: [node], coordinator: node }, modelPaths);
}

test("[engine] load_timeout_seconds: every launch step that waits for the model waits at least that long; shorter ones keep their own", async () => {
  const settings = oneNodeSettings();
  expect((await requestWith("")).deadlines).toMatchObject({ stageListenMs: 60_000, coordinatorHealthMs: 120_000, readinessMs: 60_000 });
  expect((await requestWith("load_timeout_seconds = 90\n")).deadlines).toMatchObject({
    stageListenMs: 90_000,
    coordinatorHealthMs: 120_000,
    readinessMs: 90_000,
    stopGraceMs: 5_000,
  });
  expect((await requestWith("load_timeout_seconds = 900\n")).deadlines).toMatchObject({ stageListenMs: 900_000, coordinatorHealthMs: 900_000, readinessMs: 900_000 });
  const refused = parseCluster(
    `nodes = ["a"]\n[model]\nid = "m"\nsource = "push"\n[engine]\nload_timeout_seconds = 0\n`,
    join(root, "clusters", "x.toml"),
    settings.value,
  );
  expect(refused.ok).toBe(false);
});

test("[engine] generation_watchdog_seconds goes with the launch (to its ledger entry, which health reads); 0 is taken, out of range is refused", async () => {
  expect((await requestWith("")).generationWatchdogSeconds).toBeUndefined();
  expect((await requestWith("generation_watchdog_seconds = 30\n")).generationWatchdogSeconds).toBe(30);
  expect((await requestWith("generation_watchdog_seconds = 0\n")).generationWatchdogSeconds).toBe(0);
  for (const value of ["-1", "3601", "1.5", '"30s"']) {
    const refused = parseCluster(
      `nodes = ["a"]\n[model]\nid = "m"\nsource = "push"\n[engine]\ngeneration_watchdog_seconds = ${value}\n`,
      join(root, "clusters", "x.toml"),
      oneNodeSettings().value,
    );
    expect(refused.ok, value).toBe(false);
  }
});

test("an address from an ssh config's HostName is one the engines can dial: IPv4 written as IPv6 given as IPv4, IPv6 in its short form; a link-local one refused before anything starts", async () => {
  const nodes = ["mapped", "longhand", "zoned", "link-local"];
  const settingsText = nodes.map((n) => `[nodes.${n}]\nhost = "${n}"\nmodel_dir = "${join(root, n)}"\nmemory = "4GiB"`).join("\n");
  const settings = parseSettings(settingsText, join(root, "shardctl.toml"));
  if (!settings.ok) throw new Error(JSON.stringify(settings.issues));
  const coordinator = new LocalNode({ name: "local", host: "local", modelDir: join(root, "state") });
  const requestOf = async (pair: string[]) => {
    const cluster = parseCluster(
      `nodes = ${JSON.stringify(pair)}\n[model]\nid = "${join(root, "model")}"\nsource = "push"\n[engine]\nkind = "reference"\n`,
      join(root, "clusters", "z.toml"),
      settings.value,
    );
    if (!cluster.ok) throw new Error(JSON.stringify(cluster.issues));
    const stages = pair.map((n) => pool.get(nodeConfigOf(settings.value.nodes[n]!)));
    const modelPaths = new Map([...pair, "local"].map((n) => [n, join(root, "model")]));
    return buildLaunchRequest(cluster.value, settings.value, "rev", (await planCluster(cluster.value, settings.value)).plan, { stages, coordinator }, modelPaths);
  };
  const request = await requestOf(["mapped", "longhand"]);
  expect(request.stages.map((s) => [s.nodeName, s.bindHost])).toEqual([
    ["mapped", "127.0.0.9"],
    ["longhand", "::1"],
  ]);
  for (const [node, address] of [
    ["zoned", "fe80::2cf9:1cff:fe17:28d9%eth0"],
    ["link-local", "fe80::1"],
  ] as const) {
    const refused = requestOf(["mapped", node]);
    await expect(refused).rejects.toMatchObject({ reason: "NodeAddressUnusable", terminal: true });
    await expect(refused).rejects.toThrow(`node ${node}: it is reached at the link-local address ${address} (its host, its ssh config's HostName`);
  }
});
