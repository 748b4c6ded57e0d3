/**
 * `host:port` as URLs and OpenSSH write it: an IPv6 address in brackets (`[fd00::11]:7001`), so the
 * port cannot be read as part of it. The engine's own copy: it runs on nodes as its own command and
 * takes nothing from the control plane.
 */
export function joinHostPort(host: string, port: number | undefined): string {
  return `${host.includes(":") ? `[${host}]` : host}:${port ?? "?"}`;
}
