/**
 * The parts of OpenSSH's client config a node alias needs: HostName, User, Port, IdentityFile, from
 * `Host` blocks whose patterns match (first value wins, as in ssh). `Include` is followed as ssh
 * does (relative paths under ~/.ssh, `*` and `?` in the file name, conditional inside a Host block,
 * 16 levels at most); `Match` blocks are not evaluated (their options are ignored). A ProxyJump or
 * ProxyCommand is reported (`proxy`) rather than dropped: connecting straight to the host instead
 * would fail as a timeout, or reach a different machine, with nothing saying why.
 */
import { readdir } from "node:fs/promises";
import { homedir } from "node:os";
import { isAbsolute, join, sep } from "node:path";
import { globMatch, readSshFile } from "./known-hosts.js";

export interface SshHostConfig {
  hostName?: string;
  user?: string;
  port?: number;
  identityFiles: string[];
  /** The first ProxyJump or ProxyCommand that applies (not "none"), as written. */
  proxy?: { keyword: "ProxyJump" | "ProxyCommand"; value: string };
}

/** How deep Include may nest, as in OpenSSH. */
const maxIncludeDepth = 16;

export async function readSshConfig(path: string, alias: string): Promise<SshHostConfig> {
  return resolveSshConfig(await readSshFile(path, "ssh client config ([ssh] config)"), alias);
}

/**
 * The ssh config file at `path` and every file its `Include` lines name, in any block and nested
 * (the files ssh could read for some host), to tell whether any of them changed. Unreadable ones
 * are listed all the same.
 */
export async function sshConfigFiles(path: string): Promise<string[]> {
  const files: string[] = [];
  const visit = async (file: string, depth: number): Promise<void> => {
    if (files.includes(file) || depth > maxIncludeDepth) return;
    files.push(file);
    const text = await readSshFile(file, "ssh client config").catch(() => "");
    for (const line of text.split("\n")) {
      const include = /^\s*include(?:\s*=\s*|\s+)(.*)$/i.exec(line);
      if (include !== null) for (const included of await includedFiles(unquote(include[1]!.trim()))) await visit(included, depth + 1);
    }
  };
  await visit(path, 0);
  return files;
}

/** The settings `text` gives `alias`; `Include`d files are read from disk. */
export async function resolveSshConfig(text: string, alias: string): Promise<SshHostConfig> {
  const out: SshHostConfig = { identityFiles: [] };
  await applyConfig(text, alias, out, { proxySet: false }, 0);
  return out;
}

async function applyConfig(text: string, alias: string, out: SshHostConfig, state: { proxySet: boolean }, depth: number): Promise<void> {
  // Each file starts active; a Host line inside it does not change the including file's block.
  let active = true;
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
    if (keyword === "include") {
      if (depth >= maxIncludeDepth) throw new Error(`ssh client config: Include nested more than ${maxIncludeDepth} levels deep (a file including itself?)`);
      for (const file of await includedFiles(value)) await applyConfig(await readSshFile(file, `ssh client config included as ${file}`), alias, out, state, depth + 1);
    } else if (keyword === "hostname" && out.hostName === undefined) out.hostName = expandHostName(value, alias);
    else if (keyword === "user" && out.user === undefined) out.user = value;
    else if (keyword === "port" && out.port === undefined && /^\d+$/.test(value)) out.port = Number(value);
    else if (keyword === "identityfile") out.identityFiles.push(expandHome(value));
    else if ((keyword === "proxyjump" || keyword === "proxycommand") && !state.proxySet) {
      // The first of either wins, "none" included (it switches off a later Host * proxy).
      state.proxySet = true;
      if (value.toLowerCase() !== "none") out.proxy = { keyword: keyword === "proxyjump" ? "ProxyJump" : "ProxyCommand", value };
    }
  }
}

/**
 * A HostName value with its tokens expanded as OpenSSH does: `%h` is the host as given, `%%` a
 * percent sign (the way to write an IPv6 zone there). Other tokens are kept as written.
 */
function expandHostName(value: string, alias: string): string {
  return value.replace(/%(.)/g, (token, key: string) => (key === "h" ? alias : key === "%" ? "%" : token));
}

/** The files one Include line names, in order: each path with its wildcards (`*`, `?`, in any component) matched in sorted names. */
async function includedFiles(value: string): Promise<string[]> {
  const files: string[] = [];
  for (const word of value.split(/\s+/).filter((w) => w !== "")) {
    const expanded = expandHome(word);
    files.push(...(await expandWildcards(isAbsolute(expanded) ? expanded : join(homedir(), ".ssh", expanded))));
  }
  return files;
}

/** The existing paths `pattern` matches, component by component, as glob(3) does (names sorted, case-sensitive, no hidden names for a leading wildcard). */
async function expandWildcards(pattern: string): Promise<string[]> {
  if (!/[*?]/.test(pattern)) return [pattern];
  const parts = pattern.split(sep);
  let paths = [parts[0] === "" ? sep : parts[0]!];
  for (const part of parts.slice(1)) {
    if (part === "") continue;
    if (!/[*?]/.test(part)) {
      paths = paths.map((p) => join(p, part));
      continue;
    }
    const next: string[] = [];
    for (const dir of paths) {
      const names = await readdir(dir).catch(() => [] as string[]);
      next.push(
        ...names
          .filter((n) => globMatch(part, n, { caseSensitive: true }) && !(n.startsWith(".") && !part.startsWith(".")))
          .sort()
          .map((n) => join(dir, n)),
      );
    }
    paths = next;
  }
  return paths;
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
