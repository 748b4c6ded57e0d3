/**
 * The dashboard's bearer token: read from the environment variable `[daemon] ui_token_env` names,
 * never from a file the page could be served, never logged. Off loopback the dashboard refuses to
 * start without one. Compared in constant time: both sides are hashed to 32 bytes first, so neither
 * the content nor the length of the expected token shows in how long a refusal takes.
 */
import { createHash, timingSafeEqual } from "node:crypto";
import { ShardctlError } from "../errors/index.js";
import { isLoopbackAddress, type Settings } from "../spec/index.js";

/** The token the dashboard requires for its action, or undefined when none is configured (loopback only). */
export function dashboardTokenOf(settings: Settings, env: NodeJS.ProcessEnv = process.env): string | undefined {
  const address = settings.daemon.uiAddress;
  if (address === undefined) return undefined;
  const variable = settings.daemon.uiTokenEnv;
  if (variable === undefined) {
    if (isLoopbackAddress(address)) return undefined;
    throw new ShardctlError(
      "DashboardTokenMissing",
      `[daemon] ui_address = "${address}" is not a loopback address: set [daemon] ui_token_env to the environment variable holding the dashboard's token in ${settings.file}, or use a 127.0.0.1 address`,
      { terminal: true },
    );
  }
  const token = env[variable];
  if (token === undefined || token.trim() === "") {
    throw new ShardctlError(
      "DashboardTokenMissing",
      `[daemon] ui_token_env names ${variable}, which is not set (or empty) in the daemon's environment: export ${variable}=<token> before starting the daemon`,
      { terminal: true },
    );
  }
  // A bearer header carries one word of visible ASCII (bearerTokenOf reads no more, browsers send no
  // more): a token with a space, a trailing newline or an accent could never be presented.
  if (!/^[\x21-\x7e]+$/.test(token)) {
    throw new ShardctlError(
      "DashboardTokenMissing",
      `[daemon] ui_token_env names ${variable}, whose value holds a space, a line break or a character outside visible ASCII, which no request can send: set ${variable} to one word of visible ASCII (e.g. the output of \`openssl rand -hex 32\`)`,
      { terminal: true },
    );
  }
  return token;
}

/** Whether `presented` is `expected`, in time independent of both (SHA-256 digests compared with timingSafeEqual). */
export function tokenMatches(expected: string, presented: string): boolean {
  const digest = (value: string): Buffer => createHash("sha256").update(value, "utf8").digest();
  return timingSafeEqual(digest(expected), digest(presented));
}

/** The token of an `Authorization: Bearer <token>` header, or undefined. */
export function bearerTokenOf(header: string | undefined): string | undefined {
  const match = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(header ?? "");
  return match?.[1];
}
