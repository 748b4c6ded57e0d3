/**
 * Whether a "host:port" address binds loopback only: 127.0.0.0/8, [::1] or "localhost". Any other
 * name or address (0.0.0.0, a LAN address, a hostname) counts as reachable from a network, since
 * what a name resolves to can change after the settings were checked.
 */
export function isLoopbackAddress(hostPort: string): boolean {
  const host = hostOf(hostPort).toLowerCase();
  if (host === "localhost" || host === "::1") return true;
  const octets = host.split(".");
  return octets.length === 4 && octets[0] === "127" && octets.every((o) => /^[0-9]{1,3}$/.test(o) && Number(o) <= 255);
}

/** The host of "host:port" or "[v6]:port", brackets removed. */
export function hostOf(hostPort: string): string {
  const host = hostPort.slice(0, hostPort.lastIndexOf(":"));
  return host.startsWith("[") && host.endsWith("]") ? host.slice(1, -1) : host;
}
