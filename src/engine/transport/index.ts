/** Engine transport: frames, challenge-response authentication, links. */
export { Kind, encodeFrame, FrameReader, frameHeaderBytes } from "./frames.js";
export { Link, acceptLink, dialLink, dialLinkUntil, type Hello, type PeerRole } from "./link.js";
export { readTokenFile } from "./auth.js";
export * from "./messages.js";
