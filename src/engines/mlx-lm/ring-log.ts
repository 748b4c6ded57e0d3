/**
 * What MLX's ring backend says while it forms (MLX_RING_VERBOSE=1): rank 0 binds its own address
 * (`[ring] Rank 0 accepting`), every other rank first connects to its neighbour (`[ring] Rank 1
 * connecting to 0`), retrying a refused connection with a doubling wait (`[ring] Attempt 2 waiting
 * 4000 ms (error: 111 )`, the errno), and once connected binds its own (`[ring] Rank 1
 * accepting`); rank 0 connects last. A blackholed neighbour leaves the rank in connect() with no
 * further line. So a rank other than 0 whose log ends with its connection, or a retry of it, never
 * reached its neighbour: the ring did not form, and rank 0 never serves HTTP. Rank 0's connection
 * is its last ring line even when it succeeds (the server then loads silently): its log never tells.
 */
import type { UnreachableNextStage } from "../types.js";

const connectingLine = /\[ring\] Rank (\d+) connecting to (\d+)/;
const retryLine = /\[ring\] Attempt (\d+) waiting (\d+) ms \(error: (\d+)/;

/** Errno values a refused or failed connect() reports on Linux and macOS, in words. */
const connectErrors: Record<string, string> = {
  "111": "connection refused",
  "61": "connection refused",
  "110": "connection timed out",
  "60": "connection timed out",
  "113": "no route to host",
  "65": "no route to host",
  "101": "network unreachable",
  "51": "network unreachable",
};

/** The neighbour a rank was still connecting to when its log ended, or undefined when its ring connected (or it never said). */
export function ringNeighbourUnreachableIn(logTail: readonly string[]): UnreachableNextStage | undefined {
  let connecting: RegExpExecArray | undefined;
  let retry: RegExpExecArray | undefined;
  for (const line of logTail) {
    const started = connectingLine.exec(line);
    if (started !== null) {
      connecting = started;
      retry = undefined;
      continue;
    }
    const again = retryLine.exec(line);
    if (again !== null) {
      retry = again;
      continue;
    }
    // Any other line (its own accepting, the server's) comes after connect() returned.
    if (line.trim() !== "") connecting = retry = undefined;
  }
  if (connecting === undefined || connecting[1] === "0") return undefined;
  const errno = retry?.[3];
  const error =
    retry === undefined || errno === undefined
      ? "still connecting, with no answer, when the launch stopped waiting"
      : `${connectErrors[errno] ?? `errno ${errno}`}, ${Number(retry[1]) + 1} attempts`;
  return { peer: `rank ${connecting[2]}`, address: "its address in the launch's hostfile", error };
}
