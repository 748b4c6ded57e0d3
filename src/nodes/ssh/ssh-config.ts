/**
 * The parts of OpenSSH's client config a node alias needs: HostName, User, Port, IdentityFile, from
 * `Host` blocks whose patterns match (first value wins, as in ssh). `Match` blocks are not evaluated
 * (their options are ignored) and `Include` is not followed. A ProxyJump or ProxyCommand is reported
 * (`proxy`) rather than dropped: connecting straight to the host instead would fail as a timeout, or
 * reach a different machine, with nothing saying why.
 */
import { readSshFile } from "./known-hosts.js";
import { homedir } from "node:os";
import { globMatch } from "./known-hosts.js";

export interface SshHostConfig {
  hostName?: string;
  user?: string;
  port?: number;
  identityFiles: string[];
  /** The first ProxyJump or ProxyCommand that applies (not "none"), as written. */
  proxy?: { keyword: "ProxyJump" | "ProxyCommand"; value: string };
}

export async function readSshConfig(path: string, alias: string): Promise<SshHostConfig> {
  return resolveSshConfig(await readSshFile(path, "ssh client config ([ssh] config)"), alias);
}

export function resolveSshConfig(text: string, alias: string): SshHostConfig {
  const out: SshHostConfig = { identityFiles: [] };
  let active = true;
  let proxySet = false;
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (line === "" || line.startsWith("#")) continue;
    const m = /^(\S+?)(?:\s*=\s*|\s+)(.*)$/.exec(line);
    if (m === null) continue;
    const keyword = (m[1] ?? "").toLowerCase();
    const value = unquote((m[2] ?? "").trim());
    if (keyword === "host") {
      active = hostMatches(value, alias);
      continue;
    }
    if (keyword === "match") {
      active = false;
      continue;
    }
    if (!active) continue;
    if (keyword === "hostname" && out.hostName === undefined) out.hostName = value.replaceAll("%h", alias);
    else if (keyword === "user" && out.user === undefined) out.user = value;
    else if (keyword === "port" && out.port === undefined && /^\d+$/.test(value)) out.port = Number(value);
    else if (keyword === "identityfile") out.identityFiles.push(expandHome(value));
    else if ((keyword === "proxyjump" || keyword === "proxycommand") && !proxySet) {
      // The first of either wins, "none" included (it switches off a later Host * proxy).
      proxySet = true;
      if (value.toLowerCase() !== "none") out.proxy = { keyword: keyword === "proxyjump" ? "ProxyJump" : "ProxyCommand", value };
    }
  }
  return out;
}

function hostMatches(patterns: string, alias: string): boolean {
  let matched = false;
  for (const pattern of patterns.split(/\s+/)) {
    const negated = pattern.startsWith("!");
    if (globMatch(negated ? pattern.slice(1) : pattern, alias)) {
      if (negated) return false;
      matched = true;
    }
  }
  return matched;
}

function unquote(value: string): string {
  return value.length >= 2 && value.startsWith('"') && value.endsWith('"') ? value.slice(1, -1) : value;
}

export function expandHome(path: string): string {
  return path === "~" ? homedir() : path.startsWith("~/") ? `${homedir()}${path.slice(1)}` : path;
}
