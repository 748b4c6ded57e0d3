/**
 * The coordinator's control address: its node's address in the cluster file, bound here as mlxcel's
 * coordinator binds it. The last stage dials it and sends its results on that link, as mlxcel's
 * stages dial the coordinator's address with theirs; so the address must be one of this machine's
 * (binding fails otherwise) and one the last stage reaches (it cannot form the pipeline otherwise).
 * One link is taken, from the last stage; anything else is refused.
 */
import { createServer, type Server, type Socket } from "node:net";
import type { Logger } from "../log.js";
import { LogThrottle, shownMessage } from "../log-throttle.js";
import { limitConnections } from "./connection-limits.js";
import { joinHostPort } from "../transport/index.js";
import { acceptLink, HandshakeAbandoned, type Link } from "../transport/index.js";

export interface ControlListener {
  /** Resolves with the last stage's link once it has dialed in. */
  readonly results: Promise<Link>;
  close(): void;
}

/** Bind `host:port`; rejects when the address cannot be bound (not this machine's, or in use). */
export async function listenForResults(
  address: { host: string; port: number },
  nodeId: string,
  lastStageId: string,
  token: Buffer | undefined,
  log: Logger,
): Promise<ControlListener> {
  let deliver: (link: Link) => void = () => {};
  const results = new Promise<Link>((resolve) => (deliver = resolve));
  let taken = false;
  const refusals = new LogThrottle();
  const refuse = (remote: string, err: string): void => {
    const { log: say, suppressed } = refusals.take(err);
    if (say) log.warn({ remote, err: shownMessage(err), ...(suppressed > 0 ? { refusedSinceLastLogged: suppressed } : {}) }, "peer refused on the control address");
  };
  const server = createServer((socket: Socket) => {
    const remote = joinHostPort(socket.remoteAddress ?? "?", socket.remotePort);
    acceptLink(socket, nodeId, token).then(
      ({ link, hello }) => {
        if (taken || hello.role !== "stage" || hello.nodeId !== lastStageId) {
          refuse(remote, `${hello.role} ${hello.nodeId} is not expected on the control address (only the last stage, ${lastStageId}, once)`);
          link.close();
          return;
        }
        taken = true;
        log.info({ remote, peer: link.peer }, "last stage connected to the control address");
        deliver(link);
      },
      (error: unknown) => {
        // A readiness probe (connect, then close before sending a byte) is not an intruder.
        if (!(error instanceof HandshakeAbandoned)) refuse(remote, (error as Error).message);
      },
    );
  });
  // A quarter of the descriptors (the HTTP side takes half): a flood of unfinished handshakes here
  // must not take the ones /health and the stage links need.
  limitConnections(server, log, 1 / 4);
  await listen(server, address, log);
  return { results, close: () => server.close() };
}

function listen(server: Server, address: { host: string; port: number }, log: Logger): Promise<void> {
  return new Promise((resolve, reject) => {
    const failed = (error: Error): void =>
      reject(new Error(`cannot bind the control address ${joinHostPort(address.host, address.port)}: ${error.message}`, { cause: error }));
    server.once("error", failed);
    server.listen(address.port, address.host, () => {
      server.off("error", failed);
      log.info({ address: joinHostPort(address.host, address.port) }, "control address listening");
      resolve();
    });
  });
}
