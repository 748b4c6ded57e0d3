import type { NodeAccess } from "./types.js";

/** The tools a node's socket table is read with, in the order they are tried. */
export type ListenerTool = "netstat-bsd" | "ss" | "netstat" | "lsof";

/**
 * The node's TCP sockets, after a line naming the tool that listed them: on macOS its netstat
 * (which lists every user's sockets; its lsof shows another user's only to root), elsewhere `ss`,
 * else net-tools' netstat, else lsof (whose status 1 means it found nothing). $1, when given,
 * picks the tool; $2 = "all" lists sockets in every state, otherwise the listening ones.
 */
const listSocketsScript = `want=$1
if [ -z "$want" ]; then
  if [ "$(uname)" = Darwin ]; then want=netstat-bsd
  elif command -v ss >/dev/null 2>&1; then want=ss
  elif command -v netstat >/dev/null 2>&1; then want=netstat
  else want=lsof; fi
fi
echo "$want"
case $want in
  netstat-bsd) exec netstat -an -p tcp ;;
  ss) if [ "$2" = all ]; then exec ss -tan; else exec ss -tln; fi ;;
  netstat) if [ "$2" = all ]; then exec netstat -tan; else exec netstat -tln; fi ;;
  lsof) if [ "$2" = all ]; then lsof -nP -iTCP; else lsof -nP -iTCP -sTCP:LISTEN; fi; [ $? -le 1 ] ;;
esac`;

/** A TCP socket by its local address as the tool wrote it ("*", "0.0.0.0" and "::" are any) and its port. */
export interface TcpSocket {
  address: string;
  port: number;
}

/**
 * The TCP sockets something listens on at `node`, read from its socket table rather than by
 * connecting: a port of an engine whose listeners take the first connection as their peer (MLX's
 * ring) must never be probed. Undefined when the node cannot list them (no tool, no answer).
 * `tool` forces one (tests); by default the node's own is used.
 */
export function listeningSockets(node: NodeAccess, options: { deadlineMs?: number; tool?: ListenerTool } = {}): Promise<TcpSocket[] | undefined> {
  return readSockets(node, "listening", options);
}

/**
 * Every TCP socket at `node`, listening or connected (an outgoing connection's local port is held
 * as surely as a listener's), by its local address and port; undefined when it cannot be read.
 * Sockets in TIME-WAIT are left out: they belong to no process, and a listener binds over them.
 */
export function boundSockets(node: NodeAccess, options: { deadlineMs?: number; tool?: ListenerTool } = {}): Promise<TcpSocket[] | undefined> {
  return readSockets(node, "all", options);
}

async function readSockets(node: NodeAccess, which: "listening" | "all", options: { deadlineMs?: number; tool?: ListenerTool }): Promise<TcpSocket[] | undefined> {
  const result = await node.run(["sh", "-c", listSocketsScript, "sh", options.tool ?? "", which], { deadlineMs: options.deadlineMs ?? 2_000 }).catch(() => undefined);
  if (result === undefined || result.exitCode !== 0) return undefined;
  const [tool, ...lines] = result.stdout.split("\n");
  const sockets: TcpSocket[] = [];
  for (const line of lines) {
    const columns = line.trim().split(/\s+/);
    // Only listeners: netstat lists every socket of its kind; headers say no LISTEN either.
    if (which === "listening" && tool !== "ss" && !/LISTEN/.test(line)) continue;
    if (which === "all" && /TIME[-_]WAIT/.test(line)) continue;
    // The local address: lsof's next to last column ("127.0.0.1:39600 (LISTEN)", or
    // "127.0.0.1:5000->127.0.0.1:39600" for a connection), the others' fourth (headers have none).
    const socket = parseLocalAddress((tool === "lsof" ? columns.at(-2)?.split("->")[0] : columns[3]) ?? "");
    if (socket !== undefined) sockets.push(socket);
  }
  return sockets;
}

/**
 * A socket's local address as ss, lsof and netstat write it ("127.0.0.1:39600", "[::1]:22",
 * "*:39600", BSD's "127.0.0.1.39600"); undefined for anything else (a header).
 */
export function parseLocalAddress(local: string): TcpSocket | undefined {
  // The port follows the last ':' (ss, lsof, net-tools) or '.' (BSD netstat: 127.0.0.1.39600);
  // IPv6 addresses come bracketed ([::1]:22), with a zone (fe80::1%eth0) or bare (:::22).
  const split = /^(.*)[:.](\d{1,5})$/.exec(local);
  if (split === null) return undefined;
  const address = split[1]!.replace(/^\[(.*)\]$/, "$1").replace(/%.*$/, "");
  return { address: address === "" || address === ":" ? "::" : address, port: Number(split[2]) };
}

/** Whether a socket's local address, as a socket-table tool writes it, is every interface ("*", 0.0.0.0 or ::). */
export function isEveryInterface(address: string): boolean {
  return address === "*" || address === "0.0.0.0" || address === "::";
}

/**
 * Whether a socket holds `address`'s port: it is bound to any address, or to that one (brackets
 * of an IPv6 literal aside). An unknown `address` (undefined) is held by any socket of the port.
 */
export function socketCovers(socket: TcpSocket, address: string | undefined): boolean {
  if (address === undefined || isEveryInterface(socket.address)) return true;
  return socket.address === address.replace(/^\[(.*)\]$/, "$1");
}

/**
 * Whether a socket keeps a listener from binding `address`'s port: it covers that address, or
 * `address` is every interface — 0.0.0.0 cannot be bound beside any IPv4 socket of the port, nor
 * :: (dual-stack, Linux's default) beside any socket of it. An undefined `address` clashes with any.
 */
export function socketClashes(socket: TcpSocket, address: string | undefined): boolean {
  if (socketCovers(socket, address)) return true;
  const wanted = address!.replace(/^\[(.*)\]$/, "$1");
  if (wanted === "::") return true;
  return wanted === "0.0.0.0" && !socket.address.includes(":");
}
