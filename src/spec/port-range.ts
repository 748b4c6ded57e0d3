/** Transport port ranges ("39600-39629"), inclusive at both ends. */
import { ShardctlError } from "../errors/index.js";
import { allowed, quote } from "./patterns.js";

export interface PortRange {
  /** First port of the range (inclusive). */
  first: number;
  /** Last port of the range (inclusive). */
  last: number;
}

/** Ports below 1024 need root on the nodes, so they are refused. */
export const minPort = 1024;
export const maxPort = 65535;

/** Why a port range string is not acceptable, or undefined when it is. */
export function checkPortRange(text: string): string | undefined {
  const match = /^([0-9]{1,5})-([0-9]{1,5})$/.exec(text);
  if (match === null) return `${quote(text)} is not allowed: expected ${allowed.portRange}`;
  const first = Number(match[1]);
  const last = Number(match[2]);
  if (first < minPort || last > maxPort) return `${quote(text)}: ports must lie within ${minPort}-${maxPort}`;
  if (first > last) return `${quote(text)}: the first port must not be greater than the last`;
  return undefined;
}

/** Parse "first-last". Throws ShardctlError `InvalidPortRange` when malformed or out of bounds. */
export function parsePortRange(text: string): PortRange {
  const problem = checkPortRange(text);
  if (problem !== undefined) throw new ShardctlError("InvalidPortRange", problem, { terminal: true });
  const [first, last] = text.split("-").map(Number) as [number, number];
  return { first, last };
}

/** Number of ports in a range. */
export function countPorts(range: PortRange): number {
  return range.last - range.first + 1;
}
