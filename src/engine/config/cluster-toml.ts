/**
 * The mlxcel cluster TOML (the `--distributed-config` file: a `[cluster]` table with `name`,
 * `pipeline_parallel_size`, `tensor_parallel_size` (only 1) and `transport_backend` (tcp,
 * thunderbolt or rdma), and `[[nodes]]` with `id`, `address` ("IP:port"), `role` ("hybrid" for the
 * one coordinator, "pipeline_stage" for each stage) and `stage` (0..N-1)), read and validated for
 * the reference engine, which also accepts an explicit half-open `layers = [start, end]` on stage
 * nodes (all stage nodes or none). Each node binds its address and its peers dial it, the
 * coordinator's included (its control address, where the last stage sends its results).
 */
import { joinHostPort } from "../transport/host-port.js";
import { readFileSync } from "node:fs";
import { parse } from "smol-toml";

export interface ClusterNode {
  id: string;
  /** IP address to bind or dial (never a wildcard). */
  host: string;
  port: number;
  role: "hybrid" | "pipeline_stage";
  /** Stage index, stage nodes only. */
  stage: number | undefined;
  /** Explicit half-open layer range, stage nodes only. */
  layers: [number, number] | undefined;
}

export interface ClusterConfig {
  file: string;
  name: string;
  pipelineParallelSize: number;
  coordinator: ClusterNode;
  /** Stage nodes ordered by stage index. */
  stages: ClusterNode[];
}

/** A problem with the cluster file; the message names the file. */
export class ClusterConfigError extends Error {
  override readonly name = "ClusterConfigError";
}

/** Read and validate the cluster TOML at `file`. */
export function readClusterConfig(file: string): ClusterConfig {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (error) {
    throw new ClusterConfigError(`${file}: cannot read: ${(error as Error).message}`);
  }
  let raw: unknown;
  try {
    raw = parse(text);
  } catch (error) {
    throw new ClusterConfigError(`${file}: invalid TOML: ${(error as Error).message}`);
  }
  return validateCluster(file, raw);
}

function fail(file: string, message: string): never {
  throw new ClusterConfigError(`${file}: ${message}`);
}

/** Validate a parsed cluster TOML document. */
export function validateCluster(file: string, raw: unknown): ClusterConfig {
  const doc = raw as { cluster?: Record<string, unknown>; nodes?: unknown };
  const cluster = doc.cluster;
  if (cluster === undefined || typeof cluster !== "object") fail(file, "missing [cluster] table");
  const pp = cluster.pipeline_parallel_size;
  if (typeof pp !== "number" || !Number.isInteger(pp) || pp < 1) {
    fail(file, `expected cluster.pipeline_parallel_size to be a positive integer, got ${JSON.stringify(pp)}`);
  }
  const tp = cluster.tensor_parallel_size;
  if (tp !== undefined && tp !== 1) fail(file, `tensor_parallel_size ${JSON.stringify(tp)} is not supported (only 1)`);
  const backend = cluster.transport_backend ?? "tcp";
  if (!["tcp", "thunderbolt", "rdma"].includes(String(backend))) fail(file, `unknown transport_backend ${JSON.stringify(backend)}`);
  if (!Array.isArray(doc.nodes) || doc.nodes.length === 0) fail(file, "no [[nodes]]");

  const nodes = doc.nodes.map((n: unknown, i: number) => readNode(file, n, i));
  const ids = new Set<string>();
  const addresses = new Set<string>();
  for (const node of nodes) {
    if (ids.has(node.id)) fail(file, `node id "${node.id}" is used twice`);
    ids.add(node.id);
    const address = joinHostPort(node.host, node.port);
    if (addresses.has(address)) fail(file, `address ${address} is used twice`);
    addresses.add(address);
  }
  const hybrids = nodes.filter((n) => n.role === "hybrid");
  if (hybrids.length !== 1) fail(file, `expected exactly one node with role "hybrid" (the coordinator), found ${hybrids.length}`);
  const stages = nodes.filter((n) => n.role === "pipeline_stage").sort((a, b) => (a.stage ?? 0) - (b.stage ?? 0));
  if (stages.length !== pp) fail(file, `pipeline_parallel_size is ${pp} but ${stages.length} pipeline_stage nodes are defined`);
  stages.forEach((s, i) => {
    if (s.stage !== i) fail(file, `stage indices must be exactly 0..${pp - 1}; node "${s.id}" has stage ${s.stage}`);
  });
  const withLayers = stages.filter((s) => s.layers !== undefined).length;
  if (withLayers !== 0 && withLayers !== stages.length) fail(file, "`layers` must be given on every stage node or on none");
  if (withLayers > 0) {
    let expected = 0;
    for (const s of stages) {
      const [start, end] = s.layers as [number, number];
      if (start !== expected) fail(file, `stage ${s.stage} ("${s.id}") layers start at ${start}, expected ${expected} (ranges must be contiguous from 0)`);
      expected = end;
    }
  }
  return { file, name: String(cluster.name ?? ""), pipelineParallelSize: pp, coordinator: hybrids[0] as ClusterNode, stages };
}

function readNode(file: string, raw: unknown, index: number): ClusterNode {
  const n = raw as Record<string, unknown>;
  const where = `nodes[${index}]`;
  if (typeof n.id !== "string" || n.id === "") fail(file, `${where}: expected a non-empty string id`);
  if (typeof n.address !== "string") fail(file, `${where} ("${n.id}"): expected address "IP:port"`);
  const match = /^(\d{1,3}(?:\.\d{1,3}){3}|\[[0-9a-fA-F:]+\]):(\d{1,5})$/.exec(n.address);
  const port = Number(match?.[2]);
  if (match === null || port < 1 || port > 65535) fail(file, `${where} ("${n.id}"): address ${JSON.stringify(n.address)} is not IP:port`);
  const host = (match[1] as string).replace(/^\[|\]$/g, "");
  // Every address is dialed by a peer (the coordinator's by the last stage, with its results), and
  // a wildcard names no machine: a peer elsewhere would dial itself.
  if (isWildcard(host)) fail(file, `${where} ("${n.id}"): address ${JSON.stringify(n.address)} is a wildcard; give the node's own address, which its peers dial`);
  const role = n.role;
  if (role !== "hybrid" && role !== "pipeline_stage") fail(file, `${where} ("${n.id}"): role must be "hybrid" or "pipeline_stage", got ${JSON.stringify(role)}`);
  let stage: number | undefined;
  let layers: [number, number] | undefined;
  if (role === "pipeline_stage") {
    if (typeof n.stage !== "number" || !Number.isInteger(n.stage) || n.stage < 0) fail(file, `${where} ("${n.id}"): pipeline_stage needs a non-negative integer stage`);
    stage = n.stage;
    if (n.layers !== undefined) {
      const l = n.layers;
      if (!Array.isArray(l) || l.length !== 2 || !l.every((v) => typeof v === "number" && Number.isInteger(v) && v >= 0) || (l[0] as number) >= (l[1] as number)) {
        fail(file, `${where} ("${n.id}"): layers must be [start, end] with 0 <= start < end, got ${JSON.stringify(l)}`);
      }
      layers = [l[0] as number, l[1] as number];
    }
  }
  return { id: n.id, host, port, role, stage, layers };
}

/** 0.0.0.0 or ::, however written. */
function isWildcard(host: string): boolean {
  return host.includes(":") ? host.split(":").every((group) => /^0*$/.test(group)) : host.split(".").every((octet) => Number(octet) === 0);
}

/**
 * mlxcel's default dense split: stages 0..N-2 take ceil(L/N) layers, the last takes the rest
 * (half-open ranges). Explicit ranges win; they must cover exactly [0, L).
 */
export function computeStageRanges(cluster: ClusterConfig, totalLayers: number): Array<[number, number]> {
  const n = cluster.stages.length;
  if (cluster.stages[0]?.layers !== undefined) {
    const ranges = cluster.stages.map((s) => s.layers as [number, number]);
    const end = ranges[ranges.length - 1]?.[1];
    if (end !== totalLayers) fail(cluster.file, `stage layer ranges end at ${end}, but the model has ${totalLayers} layers`);
    return ranges;
  }
  if (n > totalLayers) fail(cluster.file, `${n} stages cannot split a model of ${totalLayers} layers`);
  const per = Math.ceil(totalLayers / n);
  const ranges: Array<[number, number]> = [];
  for (let i = 0; i < n; i++) {
    const start = Math.min(i * per, totalLayers);
    const end = i === n - 1 ? totalLayers : Math.min(start + per, totalLayers);
    if (end <= start) fail(cluster.file, `the default split of ${totalLayers} layers over ${n} stages leaves stage ${i} empty; give explicit layers`);
    ranges.push([start, end]);
  }
  return ranges;
}
