/**
 * Probe the nodes of a cluster for the planner: memory (budgets), accelerator family and engine
 * version (the homogeneity gates). A node that does not answer fails the pass (transient): a
 * launch there would fail anyway, and planning on stale figures could put a stage where it no
 * longer fits.
 */
import { probeNode, type NodeAccess } from "../nodes/index.js";
import type { NodeFacts } from "../planner/index.js";
import type { ClusterSpec } from "../spec/index.js";
import { ShardctlError } from "../errors/index.js";

export async function probeFacts(spec: ClusterSpec, nodes: NodeAccess[]): Promise<Record<string, NodeFacts>> {
  // The bundled reference engine is this installation's own: only an explicit binary is asked its version.
  const engineBinary = spec.engine.binary ?? (spec.engine.kind === "mlxcel" ? "mlxcel-server" : undefined);
  const probes = await Promise.all(nodes.map((node) => probeNode(node, engineBinary === undefined ? {} : { engineBinary })));
  const unreachable = probes.filter((p) => !p.reachable);
  if (unreachable.length > 0) {
    throw new ShardctlError("NodeUnreachable", `cannot probe ${unreachable.map((p) => `${p.name} (${p.error ?? "no answer"})`).join(", ")}`);
  }
  // mlxcel on a machine that is not Apple silicon: the real problem, before "engine not found".
  const unfit = spec.engine.kind === "mlxcel" ? probes.filter((p) => p.accelerator !== undefined && p.accelerator !== "apple-silicon") : [];
  if (unfit.length > 0) {
    throw new ShardctlError(
      "EngineUnsupportedOnNode",
      `mlxcel runs on Apple silicon only; ${unfit.map((p) => `${p.name} is ${p.accelerator} ${p.os ?? ""}/${p.arch ?? ""}`.trim()).join(", ")}: use [engine] kind = "reference" or other nodes`,
      { terminal: true },
    );
  }
  // A node without the engine would only fail at launch, as a stage that exits at once: say it now.
  const engineless = engineBinary === undefined ? [] : probes.filter((p) => p.engineVersion === undefined);
  if (engineless.length > 0) {
    throw new ShardctlError(
      "EngineNotFound",
      `\`${engineBinary} --version\` fails on ${engineless.map((p) => `${p.name} (${p.error ?? "no output"})`).join(", ")}: install the engine there or set [engine] binary, then run \`shardctl reconcile\``,
      // Nothing this daemon does will install it: stall (and say so) rather than retry for ever.
      { terminal: true },
    );
  }
  const facts: Record<string, NodeFacts> = {};
  for (const probe of probes) {
    facts[probe.name] = {
      ...(probe.memoryTotalBytes === undefined ? {} : { totalBytes: probe.memoryTotalBytes }),
      ...(probe.memoryAvailableBytes === undefined ? {} : { availableBytes: probe.memoryAvailableBytes }),
      ...(probe.accelerator === undefined ? {} : { accelerator: probe.accelerator }),
      ...(probe.engineVersion === undefined ? {} : { engineVersion: probe.engineVersion }),
    };
  }
  return facts;
}
