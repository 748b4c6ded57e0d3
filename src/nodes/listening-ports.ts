import type { NodeAccess } from "./types.js";

/**
 * The node's listening TCP sockets, from the first tool it has, after a line naming it: `ss`
 * (Linux), `lsof` (macOS), `netstat` (either).
 */
const listListenersScript = `if command -v ss >/dev/null 2>&1; then echo ss; exec ss -Htln
elif command -v lsof >/dev/null 2>&1; then echo lsof; exec lsof -nP -iTCP -sTCP:LISTEN
else echo netstat; exec netstat -an; fi`;

/**
 * The TCP ports something listens on at `node`, on any address, read from its socket table rather
 * than by connecting: a port of an engine whose listeners take the first connection as their peer
 * (MLX's ring) must never be probed. Undefined when the node cannot list them (no tool, no answer).
 */
export async function listeningPorts(node: NodeAccess, deadlineMs = 2_000): Promise<ReadonlySet<number> | undefined> {
  const result = await node.run(["sh", "-c", listListenersScript], { deadlineMs }).catch(() => undefined);
  if (result === undefined || result.exitCode !== 0) return undefined;
  const [tool, ...lines] = result.stdout.split("\n");
  const ports = new Set<number>();
  for (const line of lines) {
    const columns = line.trim().split(/\s+/);
    // The local address: ss's and netstat's fourth column ("netstat -an" lists every socket: only
    // listeners count), lsof's next to last ("127.0.0.1:39600 (LISTEN)").
    const local = tool === "lsof" ? columns.at(-2) : tool === "netstat" && !/LISTEN/i.test(line) ? undefined : columns[3];
    // The port follows the last ':' (ss, lsof, Linux netstat) or '.' (macOS netstat).
    const port = /[:.](\d{1,5})$/.exec(local ?? "");
    if (port !== null) ports.add(Number(port[1]));
  }
  return ports;
}
