/**
 * Whether an address the demo's daemon will listen on is already held by another program, asked
 * before the demo prepares anything (its model): a person running the demo
 * wants to hear it at once, with the setting that moves it. (The daemon refuses to start on a taken
 * address too, before it does any work; this only says so sooner.)
 */
import { createServer } from "node:net";
import { clipCommand } from "../launch/index.js";
import { findPortListener, LocalNode } from "../nodes/index.js";
import { hostOf } from "../spec/index.js";

/**
 * Who holds `address` when it is taken: " by pid N (its command line)" where this machine's socket
 * table says (`ss`, or `lsof`), else "" (another user's process, without root); undefined when free.
 */
export async function addressHolder(address: string): Promise<string | undefined> {
  if (!(await addressTaken(address))) return undefined;
  const port = Number(address.slice(address.lastIndexOf(":") + 1));
  const holder = await findPortListener(new LocalNode({ name: "local", host: "local", port: 22, hostKeyPolicy: "strict", modelDir: "/" }), port);
  if (holder === undefined) return "";
  return ` by pid ${holder.pid} (${clipCommand(holder.command)})`;
}

/**
 * True when something already listens on `address` ("host:port"; port 0, any free port, is never
 * taken). Only EADDRINUSE counts: any other refusal (an address this machine lacks) is left for the
 * daemon to report with its own words.
 */
export async function addressTaken(address: string): Promise<boolean> {
  const port = Number(address.slice(address.lastIndexOf(":") + 1));
  if (port === 0) return false;
  const probe = createServer();
  const taken = await new Promise<boolean>((resolve) => {
    probe.once("error", (error: NodeJS.ErrnoException) => resolve(error.code === "EADDRINUSE"));
    probe.listen({ host: hostOf(address), port, exclusive: true }, () => resolve(false));
  });
  await new Promise<void>((resolve) => (probe.listening ? probe.close(() => resolve()) : resolve()));
  return taken;
}
