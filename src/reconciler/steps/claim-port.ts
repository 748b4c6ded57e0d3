/**
 * Before a launch touches anything (the running launch is not replaced yet, nothing is staged or
 * counted against the restart budget): the HTTP port the definition asks for is not one another
 * cluster of this daemon holds on that node. If it is, the pass fails with PortInUse naming that
 * cluster and is retried with back-off — not stalled, since the other cluster may be on its way
 * off the port (one commit can move a port from one cluster to another).
 */
import { engineOf } from "../../engines/index.js";
import { ShardctlError } from "../../errors/index.js";
import type { LedgerEntry } from "../../launch/index.js";
import { definitionOf } from "../pass.js";
import type { Step } from "../run-step.js";

export const claimPort: Step = {
  name: "claim-port",
  action: "launch",
  failure: "PortInUse",
  async run(pass) {
    const { spec } = definitionOf(pass);
    // Where the HTTP server listens: the coordinator's node, or the stage of the last layers for an
    // engine whose last stage serves it (its host is that stage's, not [coordinator] host).
    const lastStage = engineOf(spec.engine.kind).readiness.httpServer === "last-stage";
    const wanted = {
      node: lastStage ? (spec.nodes.at(-1) ?? "") : spec.coordinator.node,
      host: lastStage ? undefined : spec.coordinator.host,
      port: spec.coordinator.port,
    };
    const others = (await pass.ledger.list()).filter((e) => e.cluster !== pass.name);
    for (const entry of others) {
      const held = heldPort(entry, wanted);
      if (held === undefined) continue;
      throw new ShardctlError(
        "PortInUse",
        `[coordinator] port ${wanted.port} on ${wanted.node} is held by cluster "${entry.cluster}" (its ${held.purpose} port${entry.phase === "tearing-down" ? ", being torn down" : ""}): give one of the two definitions another port; retried with back-off meanwhile`,
        { terminal: false },
      );
    }
  },
};

/**
 * The port of `entry` that is `wanted`, while something of that cluster still runs on the node (a
 * teardown that could not finish elsewhere leaves an entry whose processes there are gone).
 */
function heldPort(entry: LedgerEntry, wanted: { node: string; host: string | undefined; port: number }): LedgerEntry["ports"][number] | undefined {
  if (!entry.processes.some((p) => p.node === wanted.node)) return undefined;
  return entry.ports.find(
    (p) => p.node === wanted.node && p.port === wanted.port && (wanted.host === undefined || p.host === wanted.host || p.host === "0.0.0.0" || wanted.host === "0.0.0.0"),
  );
}
