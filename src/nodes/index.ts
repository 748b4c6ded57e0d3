/** Node access: run commands, control processes and move files on the control node or over SSH. */
export type { AskOptions, PortAnswer, NodeConfig, CommandResult, RunOptions, DetachedOptions, DetachedProcess, FileStat, NodeAccess, PutOptions } from "./types.js";
export { anyShellRuns, quoteArg, quoteArgv } from "./quote.js";
export { readTail, maxTailLineChars } from "./read-tail.js";
export { within } from "./within.js";
export { joinHostPort } from "./host-port.js";
export { freeKiB } from "./free-space.js";
export { addressesListenedBy, askPortListener, findPortListener, listenersNaming, type PortListener } from "./port-listener.js";
export { boundSockets, isEveryInterface, socketClashes, socketCovers, listeningSockets, type TcpSocket, type ListenerTool } from "./listening-ports.js";
export { launchMark, markedProcesses } from "./marked-processes.js";
export { commandFailed } from "./shell-node.js";
export { oomNoteOf, startTimeFunction } from "./shell-scripts.js";
export { LocalNode } from "./local-node.js";
export { SshNode } from "./ssh/ssh-node.js";
export { sshClientFiles, type SshOptions } from "./ssh/ssh-connection.js";
export { openSshKeepaliveOptions, silentPeerBoundMs, sshKeepalive } from "./ssh/keepalive.js";
export { NodePool, createNodeAccess } from "./pool.js";
export { probeNode, createProbeCache, formatBadge, clipVersion, type NodeProbe, type ProbeOptions } from "./probe.js";
export { hashHostName, knownHostsName, fingerprint } from "./ssh/known-hosts.js";
