/**
 * How fast a silent SSH peer is given up on. A partitioned node sends no FIN or RST, so without
 * keepalives a connection to it looks open until TCP's own retransmissions give up (minutes) and
 * every command on it waits that long. With a keepalive every 1000 ms and 3 unanswered in a row
 * allowed, a connection to a silent node is dropped within 4 s (3 × 1 s unanswered, plus up to 1 s
 * until the first one is sent), inside the 5 s the health monitor has to judge a partitioned node,
 * and the pool reconnects from scratch. A handshake gets 4 s (a LAN answers in milliseconds; a
 * node that takes longer is judged unreachable and retried with back-off), or 15 round trips as its
 * TCP connection measured one, where that is longer (see handshakeDeadlineMs).
 *
 * The same bound for a path that shells out to OpenSSH's `ssh`: `openSshKeepaliveOptions()`.
 */
export const sshKeepalive = {
  /** Time between keepalives, ms (ssh2 `keepaliveInterval`, OpenSSH `ServerAliveInterval`). Default 1000. */
  intervalMs: 1_000,
  /** Unanswered keepalives before the connection is dropped (ssh2 `keepaliveCountMax`, OpenSSH `ServerAliveCountMax`). Default 3. */
  countMax: 3,
  /** Handshake deadline on a LAN, ms (OpenSSH `ConnectTimeout`; ssh2's grows with the round trip). Default 4000. */
  connectDeadlineMs: 4_000,
} as const;

/** Longest a connection to a silent node stays open, ms: (countMax + 1) × intervalMs = 4000. */
export const silentPeerBoundMs = (sshKeepalive.countMax + 1) * sshKeepalive.intervalMs;

/**
 * `-o` options giving OpenSSH's `ssh`/`scp`/`sftp` the bound above (OpenSSH takes whole seconds,
 * rounded up, at least 1).
 */
export function openSshKeepaliveOptions(bound: { intervalMs: number; countMax: number; connectDeadlineMs: number } = sshKeepalive): string[] {
  const seconds = (ms: number): number => Math.max(1, Math.ceil(ms / 1_000));
  return [
    "-o",
    `ServerAliveInterval=${seconds(bound.intervalMs)}`,
    "-o",
    `ServerAliveCountMax=${bound.countMax}`,
    "-o",
    `ConnectTimeout=${seconds(bound.connectDeadlineMs)}`,
  ];
}
