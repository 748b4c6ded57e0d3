/** `host:port` as URLs and OpenSSH write it: an IPv6 address in brackets (`[fd00::11]:22`), so the port cannot be read as part of it. */
export function joinHostPort(host: string, port: number): string {
  return `${host.includes(":") ? `[${host}]` : host}:${port}`;
}
