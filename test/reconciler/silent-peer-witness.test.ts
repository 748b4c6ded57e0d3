/**
 * Who a death's record names as the member that stopped answering, from the members' own log lines
 * (shard-engine's "peer silent" and "peer lost", as its exit-status module writes them). A member on
 * a node that missed a liveness round just before the death sits behind a path that comes and goes
 * (a lossy link): its peers' words were dropped on its own path, so its word names nobody.
 *
 * Regression, from a lab with 30 % loss on n2's link: stage-0 on n1 exited as its link to stage-1
 * closed, stage-1 on n2 said it heard nothing from stage-0 for 2585 ms, and the record named stage-0,
 * on the healthy host, as the one that stopped answering.
 */
import { expect, test } from "vitest";
import type { DeathEvent } from "../../src/health/index.js";
import type { LedgerEntry } from "../../src/launch/index.js";
import { explanation, silentPeerReport } from "../../src/reconciler/record-death.js";

/** The processes of a two-stage launch: stage-0 on n1, stage-1 on n2, the coordinator on the control machine. */
const entry = {
  engine: "reference",
  processes: [
    { role: "stage", index: 0, node: "n1" },
    { role: "stage", index: 1, node: "n2" },
    { role: "coordinator", node: "local" },
  ],
} as unknown as LedgerEntry;

/** shard-engine's line of a member that declared `peer` dead for silence (status 69 follows). */
function heardNothing(nodeId: string, peer: string, link: string, silentMs: number): string {
  return JSON.stringify({ level: 50, nodeId, name: "shard-engine", peer, link, silentMs, deadAfterMs: 2500, msg: "peer silent" });
}

const stage0Lost = JSON.stringify({ level: 50, nodeId: "stage-0", name: "shard-engine", peer: "stage-1", link: "downstream", reason: "closed", msg: "peer lost" });
const stage1HeardNothing = heardNothing("stage-1", "stage-0", "upstream", 2585);
const logs = [
  { label: "stage-0", tail: [stage0Lost] },
  { label: "stage-1", tail: [stage1HeardNothing] },
];
const death: DeathEvent = { cluster: "c1", label: "stage-0", node: "n1", reason: "StageDied", detail: "pid 17168 exited", at: new Date().toISOString() };

test("the word of a member on a healthy path names the member it stopped hearing", () => {
  expect(silentPeerReport(entry, death, logs)).toMatchObject({ reporter: "stage-1", peer: "stage-0", silentMs: 2585 });
});

test("the word of a member on a node behind a path that came and went names nobody", () => {
  expect(silentPeerReport(entry, { ...death, flakyNodes: ["n2"] }, logs)).toBeUndefined();
});

test("a witness on a healthy node is still heard when another node's path came and went", () => {
  const coordinatorHeardNothing = heardNothing("coordinator", "stage-1", "stage-1", 2600);
  const withCoordinator = [
    { label: "stage-0", tail: [stage0Lost] },
    { label: "coordinator", tail: [coordinatorHeardNothing] },
  ];
  expect(silentPeerReport(entry, { ...death, flakyNodes: ["n2"] }, withCoordinator)).toMatchObject({ reporter: "coordinator", peer: "stage-1" });
});

test("a member that exited saying a peer went silent, while another member still heard that peer, blames nobody but keeps its own words", () => {
  // A link cut one way: stage-1 heard nothing from stage-0 and exited 69; the coordinator still heard stage-0.
  const coordinatorHeard = JSON.stringify({ level: 40, nodeId: "coordinator", name: "shard-engine", peer: "stage-0", msg: "peer answering" });
  const oneWay = [
    { label: "stage-1", tail: [stage1HeardNothing] },
    { label: "coordinator", tail: [coordinatorHeard] },
  ];
  const exited: DeathEvent = { cluster: "c1", label: "stage-1", node: "n2", reason: "StageDied", detail: "pid 3141 exited", at: new Date().toISOString() };
  expect(silentPeerReport(entry, exited, oneWay)).toBeUndefined();
  expect(explanation(entry, exited, oneWay, "exited with status 69")).toBe(
    "stage-1 on n2: pid 3141 exited, saying its upstream went silent (nothing from stage-0 for 2585 ms; the other members' words do not show stage-0 stopped answering: the link between them may be what failed: cut, or passing only small packets, as a path-MTU black hole does — ping, SSH and small frames get through, activations and the links' padded heartbeats do not; try `ping -M do -s 1472` between their nodes) (with status 69)",
  );
});
