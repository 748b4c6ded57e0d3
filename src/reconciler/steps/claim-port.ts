/**
 * The HTTP port the definition asks for is not one another cluster of this daemon holds on that
 * node. If it is, the pass fails with PortInUse naming that cluster and is retried with back-off —
 * not stalled, since the other cluster may be on its way off the port (one commit can move a port
 * from one cluster to another) — and nothing of this launch is staged or counted against the
 * restart budget.
 *
 * It runs before the running launch is replaced, so a serving cluster edited onto a held port
 * keeps serving; but when what runs is broken (a process gone, a launch or a teardown left
 * half-done), after the replacement, so that is torn down whatever the port's fate. Before a
 * replacement it also reads the node's socket table: a port another program listens on would fail
 * the new launch only after the serving one was torn down, so the serving one is kept and the pass
 * retried. (A first launch finds such a port itself, and says so, given back to the budget.)
 */
import { httpBindHostOf } from "../../cluster/index.js";
import { joinHostPort, socketClashes, listeningSockets, type NodeAccess } from "../../nodes/index.js";
import { ShardctlError } from "../../errors/index.js";
import type { LedgerEntry } from "../../launch/index.js";
import { definitionOf, replacing, type Pass } from "../pass.js";
import type { Step } from "../run-step.js";

export function claimPort(when: "before-replace" | "after-replace"): Step {
  return {
    name: "claim-port",
    action: "launch",
    // What else fails here is a look at what holds ports (the ledger, a node's socket table): an
    // EMFILE reading the ledger is no port in use.
    failure: "ObserveFailed",
    async run(pass) {
      // What runs broken or half-done is replaced before the port is looked at.
      if ((replacing(pass) === "broken") !== (when === "after-replace")) return;
      const { access, wanted } = await httpAddressOf(pass);
      const entries = await pass.ledger.list();
      const others = entries.filter((e) => e.cluster !== pass.name);
      for (const entry of others) {
        const held = heldPort(entry, wanted);
        if (held === undefined) continue;
        throw new ShardctlError(
          "PortInUse",
          `[coordinator] port ${wanted.port} on ${wanted.node} is held by cluster "${entry.cluster}" (its ${held.purpose} port${entry.phase === "running" ? "" : `, ${entry.phase}`}): give one of the two definitions another port; retried with back-off meanwhile`,
          { terminal: false },
        );
      }
      const own = entries.find((e) => e.cluster === pass.name);
      if (when === "before-replace" && own !== undefined && heldPort(own, wanted) === undefined) await refuseForeignHolder(access, wanted);
    },
  };
}

/**
 * PortInUse when something listens on the wanted port at its node (its socket table says so): no
 * cluster of this daemon holds it (that was asked first) and the running launch does not, so
 * another program does. Nothing is said when the table cannot be read: the launch finds out.
 */
async function refuseForeignHolder(node: NodeAccess, wanted: HttpAddress): Promise<void> {
  const holder = (await listeningSockets(node))?.find((l) => l.port === wanted.port && socketClashes(l, wanted.host));
  if (holder === undefined) return;
  throw new ShardctlError(
    "PortInUse",
    `[coordinator] port ${wanted.port} on ${wanted.node} is held by a program that is not a cluster of this daemon (its socket table lists a listener on ${joinHostPort(holder.address, holder.port)}): stop what holds it, or give the definition another port. The running revision keeps serving meanwhile; retried with back-off`,
    { terminal: false },
  );
}

/**
 * Where the HTTP server will listen: its node, at the address it binds (unknown when that cannot
 * be resolved now: then any port of that number on the node counts).
 */
async function httpAddressOf(pass: Pass): Promise<{ access: NodeAccess; wanted: HttpAddress }> {
  const { spec } = definitionOf(pass);
  const nodes = pass.world.nodesOf(spec, pass.settings);
  return {
    access: nodes.coordinator,
    wanted: { node: nodes.coordinator.config.name, host: await httpBindHostOf(spec, nodes).catch(() => undefined), port: spec.coordinator.port },
  };
}

/** Where the HTTP server listens: its node's name, the address it binds (undefined: not known now), its port. */
export interface HttpAddress {
  node: string;
  host: string | undefined;
  port: number;
}

/**
 * The port of `entry` that is `wanted`, while that cluster launches or still runs something on the
 * node (a teardown that could not finish elsewhere leaves an entry whose processes there are gone).
 */
export function heldPort(entry: LedgerEntry, wanted: HttpAddress): LedgerEntry["ports"][number] | undefined {
  if (entry.phase !== "launching" && !entry.processes.some((p) => p.node === wanted.node)) return undefined;
  return entry.ports.find(
    (p) => p.node === wanted.node && p.port === wanted.port && (wanted.host === undefined || p.host === wanted.host || p.host === "0.0.0.0" || wanted.host === "0.0.0.0"),
  );
}
