/**
 * Staging places, per node: at most `perNode` transfers (or full hashings) at once on each node.
 * What a transfer is short of is its node's link and disk, so a node's queue is its own: a small push
 * to one node does not wait behind downloads on others. A staging takes a place per file, under that
 * file's locks: one that waits for another's download of the same file holds no place meanwhile.
 */
import { Slots } from "./slots.js";

/** Transfers at once on one node (default): four, as many as the work queue's passes. */
export const stagingPlacesPerNode = 4;

export class NodePlaces {
  private readonly nodes = new Map<string, Slots>();

  constructor(readonly perNode = stagingPlacesPerNode) {}

  /** Whether work for `node` given now would wait for a place. */
  full(node: string): boolean {
    return this.nodes.get(node)?.full ?? false;
  }

  /** Take a place on `node`: its release (once), or undefined when `signal` aborts while it waits. */
  acquire(node: string, signal?: AbortSignal): Promise<(() => void) | undefined> {
    let slots = this.nodes.get(node);
    if (slots === undefined) this.nodes.set(node, (slots = new Slots(this.perNode)));
    return slots.acquire(signal);
  }
}
