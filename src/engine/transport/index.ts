/** Engine transport: frames, challenge-response authentication, links. */
export { Kind, encodeFrame, FrameReader, frameHeaderBytes } from "./frames.js";
export { Link, acceptLink, dialLink, dialLinkUntil, HandshakeAbandoned, type Hello, type PeerRole, type Silence } from "./link.js";
export { defaultLiveness, largeHeartbeatBytes, padHeartbeatsEvery, type LivenessBounds } from "./liveness.js";
export { ComputeHeartbeat } from "./compute-heartbeat.js";
export { readTokenFile } from "./auth.js";
export { joinHostPort } from "./host-port.js";
export * from "./messages.js";
