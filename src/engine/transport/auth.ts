/**
 * Challenge-response with a shared per-launch token: the server sends a random nonce, the client
 * answers HMAC-SHA256(token, "client" ‖ nonce ‖ role ‖ node id) with its own nonce, and the server
 * proves itself back with HMAC-SHA256(token, "server" ‖ client nonce ‖ node id). The token never
 * crosses the wire; MACs are compared in constant time.
 */
import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import { readFileSync } from "node:fs";

/** A fresh 32-byte nonce, hex. */
export function createNonce(): string {
  return randomBytes(32).toString("hex");
}

export function clientMac(token: Buffer, nonce: string, role: string, nodeId: string): string {
  return createHmac("sha256", token).update(`client\n${nonce}\n${role}\n${nodeId}`).digest("hex");
}

export function serverMac(token: Buffer, clientNonce: string, nodeId: string): string {
  return createHmac("sha256", token).update(`server\n${clientNonce}\n${nodeId}`).digest("hex");
}

/** Constant-time comparison of two hex MACs. */
export function macEquals(expected: string, given: unknown): boolean {
  if (typeof given !== "string") return false;
  const a = Buffer.from(expected, "hex");
  const b = Buffer.from(given, "hex");
  return a.length === b.length && a.length > 0 && timingSafeEqual(a, b);
}

/** Read the token file (surrounding whitespace ignored); an empty file is refused. */
export function readTokenFile(file: string): Buffer {
  const token = readFileSync(file, "utf8").trim();
  if (token.length === 0) throw new Error(`transport token file ${file} is empty`);
  return Buffer.from(token, "utf8");
}
