/** Reasons of reaching the machines (src/nodes): SSH, commands and files on a node. */
export type NodeReason =
  /** The node cannot be connected to, or a command on it got no answer (transient). */
  | "NodeUnreachable"
  /** SSH authentication was refused, or there is no key to offer (terminal). */
  | "SshAuthFailed"
  /** The ssh client config routes the node through a proxy (ProxyJump, ProxyCommand), which is not followed (terminal). */
  | "SshConfigUnsupported"
  /** The node's host key is not in known_hosts and the policy does not accept new keys (terminal). */
  | "HostKeyUnknown"
  /** The node's host key differs from, or is revoked in, known_hosts: possibly an attack (terminal). */
  | "HostKeyChanged"
  /** The connection pool was closed, as the daemon shuts down (transient). */
  | "NodeClosed"
  /** A command on the node failed or printed something unexpected (transient). */
  | "NodeCommandFailed"
  /** A file operation on the node failed (transient). */
  | "NodeFileError"
  /** A detached process did not start, or exited at once (transient). */
  | "ProcessStartFailed";
