/**
 * Probe the nodes of a cluster for the planner: memory (budgets), accelerator family and engine
 * version (the homogeneity gates). A node that does not answer fails the pass (transient): a
 * launch there would fail anyway, and planning on stale figures could put a stage where it no
 * longer fits. The coordinator's node, when it is not a stage node and a process of the engine
 * serves there, is probed too (for the engine, not for budgets): without it a missing engine
 * there showed only as a coordinator that exits at every launch, spending the restart budget.
 */
import { canRunOn, engineOf, quoteKinds, selectKindsRunningOn } from "../engines/index.js";
import { clipVersion, probeNode, quoteArgv, type NodeAccess } from "../nodes/index.js";
import type { NodeFacts } from "../planner/index.js";
import type { ClusterSpec } from "../spec/index.js";
import { ShardctlError } from "../errors/index.js";
import type { ClusterNodes } from "./cluster-nodes.js";

/**
 * How long the engine's version command may take, ms (default 30 s). A first run can be slow
 * without anything being wrong: Python compiling mlx-lm's modules on a fresh install, a loaded
 * node. Past it the probe is retried (EngineNotAnswering, transient), not taken for a missing engine.
 */
export const engineVersionDeadlineMs = 30_000;

export interface ProbeClusterOptions {
  /** The version command's deadline, ms. Default engineVersionDeadlineMs. */
  versionDeadlineMs?: number;
  /**
   * Ends the probes when aborted (the daemon stopping, the definition changed): the probe throws
   * the signal's reason instead of waiting out a version command that may take 30 s.
   */
  signal?: AbortSignal;
}

export async function probeClusterNodes(spec: ClusterSpec, cluster: ClusterNodes, options: ProbeClusterOptions = {}): Promise<Record<string, NodeFacts>> {
  const engine = engineOf(spec.engine.kind);
  const nodes = nodesRunningTheEngine(cluster, engine.readiness.httpServer === "coordinator");
  // The engine says which command prints its version (none for a copy bundled with this installation).
  const versionCommand = engine.versionCommand(spec.engine);
  const deadlineMs = options.versionDeadlineMs ?? engineVersionDeadlineMs;
  const signal = options.signal;
  const probes = await Promise.all(
    nodes.map(async (node) => {
      const [probe, version] = await Promise.all([
        probeNode(node, signal === undefined ? {} : { signal }),
        versionCommand === undefined ? undefined : askEngineVersion(node, versionCommand, deadlineMs, signal),
      ]);
      if (version === undefined) return probe;
      return { ...probe, ...version };
    }),
  );
  // What a probe cut short said is no finding about the node.
  signal?.throwIfAborted();
  const unreachable = probes.filter((p) => !p.reachable);
  if (unreachable.length > 0) {
    // The SSH failure's own reason when it has one (a key refused, a host key unknown or changed, a
    // proxy the ssh config asks for): scripts match on it. Retried all the same, as the fix is outside
    // the definition (known_hosts, an agent), but for a proxy: shardctl never follows one (terminal,
    // as `shardctl nodes` says it).
    const reasons = unreachable.map((p) => p.errorReason);
    // The terminal one first: one node's proxy is not retried away by another node's refused key.
    const reason = reasons.includes("SshConfigUnsupported")
      ? "SshConfigUnsupported"
      : (reasons.find((r) => r === "SshAuthFailed" || r === "HostKeyUnknown" || r === "HostKeyChanged") ?? "NodeUnreachable");
    // Terminal, so that `wait` ends; the daemon looks again once the ssh config changes.
    const again = reason === "SshConfigUnsupported" ? "; once the ssh config is changed, the daemon tries again at its next resync" : "";
    throw new ShardctlError(reason, `cannot probe ${unreachable.map((p) => `${p.name} (${p.error ?? "no answer"})`).join(", ")}${again}`, {
      terminal: reason === "SshConfigUnsupported",
    });
  }
  // An engine on a machine it does not run on: the real problem, before "engine not found". The
  // stage nodes only: the coordinator holds no layers, and its node needs only the engine to answer.
  const stageNames = new Set(cluster.stages.map((n) => n.config.name));
  const unfit = probes.filter((p) => stageNames.has(p.name) && p.accelerator !== undefined && !canRunOn(engine, p.accelerator));
  if (engine.runsOn !== undefined && unfit.length > 0) {
    const instead = selectKindsRunningOn(unfit.flatMap((p) => (p.accelerator === undefined ? [] : [p.accelerator])));
    const hint = instead.length === 0 ? "use other nodes" : `use [engine] kind = ${quoteKinds(instead)} or other nodes`;
    throw new ShardctlError(
      "EngineUnsupportedOnNode",
      `${engine.name} runs on ${engine.runsOn.name} only; ${unfit.map((p) => `${p.name} is ${p.accelerator} ${p.os ?? ""}/${p.arch ?? ""}`.trim()).join(", ")}: ${hint}`,
      { terminal: true },
    );
  }
  // A node without the engine would only fail at launch, as a stage that exits at once: say it now.
  // One whose version command only ran out of time may have it (slow to load): that is retried.
  const unanswered = versionCommand === undefined ? [] : probes.filter((p) => p.engineVersion === undefined);
  const engineless = unanswered.filter((p) => !("versionTimedOut" in p && p.versionTimedOut === true));
  // As a person would paste it into a shell on the node.
  const shown = versionCommand === undefined ? "" : quoteArgv(versionCommand);
  if (engineless.length === 0 && unanswered.length > 0) {
    throw new ShardctlError(
      "EngineNotAnswering",
      `\`${shown}\` did not finish within ${deadlineMs / 1000} s on ${unanswered.map((p) => p.name).join(", ")}: the engine may be loading for the first time (Python compiling its modules) or the node is overloaded; will retry`,
    );
  }
  if (engineless.length > 0) {
    throw new ShardctlError(
      "EngineNotFound",
      `\`${shown}\` fails on ${engineless.map((p) => `${p.name} (${p.error ?? "no output"})`).join(", ")}: install ${engine.name} there or point [engine] ${engine.interpreter === "python" ? "python at an interpreter that has it" : "binary at it"}, then run \`shardctl reconcile ${spec.name}\``,
      // Nothing this daemon does will install it: stall (and say so) rather than retry for ever.
      { terminal: true },
    );
  }
  const facts: Record<string, NodeFacts> = {};
  // The coordinator's node, when only it runs there, by its engine's version alone: its process is
  // one end of every stage's link, so its version must be theirs (the planner's gates), but it
  // holds no layers to budget.
  const coordinator = probes.find((p) => p.name === cluster.coordinator.config.name && !stageNames.has(p.name));
  if (coordinator?.engineVersion !== undefined) facts[coordinator.name] = { engineVersion: coordinator.engineVersion };
  for (const probe of probes.filter((p) => stageNames.has(p.name))) {
    facts[probe.name] = {
      ...(probe.memoryTotalBytes === undefined ? {} : { totalBytes: probe.memoryTotalBytes }),
      ...(probe.memoryAvailableBytes === undefined ? {} : { availableBytes: probe.memoryAvailableBytes }),
      ...(probe.accelerator === undefined ? {} : { accelerator: probe.accelerator }),
      ...(probe.engineVersion === undefined ? {} : { engineVersion: probe.engineVersion }),
      // A probe that answered without a memory figure (its script timed out on a hung disk, failed):
      // the plan falls back to the declared figure, and says so rather than pass it for probed.
      ...(probe.memoryTotalBytes === undefined && probe.memoryAvailableBytes === undefined ? { memoryNotProbed: probe.error ?? "the node reported none" } : {}),
    };
  }
  return facts;
}

/** Each node a process of the engine runs on, once: the stage nodes, and the coordinator's when one serves there. */
function nodesRunningTheEngine(cluster: ClusterNodes, coordinatorProcess: boolean): NodeAccess[] {
  const stages = [...new Map(cluster.stages.map((n) => [n.config.name, n])).values()];
  const coordinator = cluster.coordinator;
  return coordinatorProcess && !stages.some((n) => n.config.name === coordinator.config.name) ? [...stages, coordinator] : stages;
}

/** The first line the engine's version command prints on `node`, or why it failed. */
async function askEngineVersion(
  node: NodeAccess,
  command: string[],
  deadlineMs: number,
  signal: AbortSignal | undefined,
): Promise<{ engineVersion: string } | { error: string; versionTimedOut?: true }> {
  try {
    const result = await node.run(command, { deadlineMs, ...(signal === undefined ? {} : { signal }) });
    const lines = `${result.stdout}\n${result.stderr}`
      .split("\n")
      .map((l) => l.trim())
      .filter((l) => l !== "");
    const line = lines[0] ?? "";
    if (result.timedOut) return { error: `no answer within ${deadlineMs / 1000} s`, versionTimedOut: true };
    if (result.exitCode === 0 && line !== "") return { engineVersion: clipVersion(line) };
    const ended = result.exitCode === undefined ? `killed by ${result.signal ?? "a signal"}` : `exit ${result.exitCode}`;
    // The line that says what went wrong: a Python traceback's is its last (ModuleNotFoundError: …),
    // a usage error's its first (error: unexpected argument …, then the usage).
    const why = lines.findLast((l) => /^\w*(Error|Exception)\b|\berror\b|not found|denied/i.test(l)) ?? line;
    return { error: why === "" ? ended : `${ended}: ${why.slice(0, 200)}` };
  } catch (error) {
    return { error: (error as Error).message };
  }
}
