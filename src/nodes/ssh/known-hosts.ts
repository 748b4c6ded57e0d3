/**
 * OpenSSH known_hosts: plain (`host`, `[host]:port`, patterns with * ? and !) and hashed
 * (`|1|base64 salt|base64 HMAC-SHA1(salt, name)`) entries, `@revoked` markers. A host is looked up
 * by the name OpenSSH uses: `host` on port 22, `[host]:port` otherwise.
 */
import { createHash, createHmac } from "node:crypto";
import { appendFile, mkdir } from "node:fs/promises";
import { readRegularText } from "../../files/index.js";
import { canonicalHost, ipv4OfMapped } from "../../spec/index.js";
import { dirname } from "node:path";

export interface KnownHostEntry {
  line: number;
  marker: "revoked" | "cert-authority" | undefined;
  patterns: string;
  keyType: string;
  /** base64 of the key blob. */
  key: string;
}

export type HostKeyVerdict =
  | { kind: "known" }
  | { kind: "unknown" }
  | { kind: "changed"; line: number; knownFingerprint: string }
  /** Known, but only under other key types: not a new host, so accept-new does not apply. */
  | { kind: "other-types"; knownTypes: string[] }
  | { kind: "revoked"; line: number };

/**
 * The name a host is recorded under in known_hosts. An IPv6 address in the form OpenSSH (and
 * ssh-keyscan) records it, however the settings spell it: lower case with zeros compressed, and an
 * IPv4-mapped one with its IPv4 part dotted (`::ffff:10.0.0.5`), as inet_ntop writes it.
 */
export function knownHostsName(host: string, port: number): string {
  const ipv4 = ipv4OfMapped(host);
  const name = ipv4 === undefined ? canonicalHost(host) : `::ffff:${ipv4}`;
  return port === 22 ? name : `[${name}]:${port}`;
}

/** The names a host may be recorded under: knownHostsName's, then the host as written (as earlier versions recorded it). */
export function knownHostsNames(host: string, port: number): string[] {
  const written = port === 22 ? host : `[${host}]:${port}`;
  return [...new Set([knownHostsName(host, port), written])];
}

export async function readKnownHosts(path: string): Promise<KnownHostEntry[]> {
  return parseKnownHosts(await readSshFile(path, knownHostsWhat));
}

const knownHostsWhat = "known_hosts file ([ssh] known_hosts)";

/**
 * The text of an OpenSSH client file (known_hosts, ssh config): empty when it is missing or is
 * /dev/null (OpenSSH's way to say "none": UserKnownHostsFile=/dev/null, ssh -F /dev/null). Any
 * other FIFO or device in its place is refused at once (NotRegularFile) rather than read for ever,
 * and a file is read up to 16 MiB (hundreds of thousands of hosts).
 */
export async function readSshFile(path: string, what: string): Promise<string> {
  if (path === "/dev/null") return "";
  return readRegularText(path, { maxBytes: 16 * 1024 * 1024, what }).catch((error: NodeJS.ErrnoException) => {
    if (error.code === "ENOENT") return "";
    throw error;
  });
}

export function parseKnownHosts(text: string): KnownHostEntry[] {
  const entries: KnownHostEntry[] = [];
  for (const [i, raw] of text.split("\n").entries()) {
    const line = raw.trim();
    if (line === "" || line.startsWith("#")) continue;
    let fields = line.split(/\s+/);
    let marker: KnownHostEntry["marker"];
    if (fields[0] === "@revoked" || fields[0] === "@cert-authority") {
      marker = fields[0] === "@revoked" ? "revoked" : "cert-authority";
      fields = fields.slice(1);
    }
    const [patterns, keyType, key] = fields;
    if (patterns === undefined || keyType === undefined || key === undefined) continue;
    entries.push({ line: i + 1, marker, patterns, keyType, key });
  }
  return entries;
}

/** True when the entry's host field names `name` (hashed or plain patterns, negation wins). */
export function matchesHost(patterns: string, name: string): boolean {
  if (patterns.startsWith("|1|")) {
    const [, , salt, hash] = patterns.split("|");
    if (salt === undefined || hash === undefined) return false;
    const digest = createHmac("sha1", Buffer.from(salt, "base64")).update(name).digest("base64");
    return digest === hash;
  }
  let matched = false;
  for (const pattern of patterns.split(",")) {
    const negated = pattern.startsWith("!");
    const body = negated ? pattern.slice(1) : pattern;
    if (globMatch(body, name)) {
      if (negated) return false;
      matched = true;
    }
  }
  return matched;
}

/**
 * OpenSSH-style glob: `*` any run, `?` one character. Case-insensitive, as host names are; file
 * names (an `Include`'s wildcards) pass `caseSensitive`, as glob(3) matches them.
 */
export function globMatch(pattern: string, text: string, options: { caseSensitive?: boolean } = {}): boolean {
  const source = pattern
    .split("")
    .map((c) => (c === "*" ? ".*" : c === "?" ? "." : c.replace(/[\\^$.|+()[\]{}]/g, "\\$&")))
    .join("");
  return new RegExp(`^${source}$`, options.caseSensitive === true ? "" : "i").test(text);
}

/** Key types recorded for a host, in file order (used to prefer those algorithms). */
/** The key types known_hosts holds for a host recorded under any of `names`. */
export function knownKeyTypes(entries: KnownHostEntry[], names: string | readonly string[]): string[] {
  const types: string[] = [];
  for (const e of entries) {
    if (e.marker === undefined && matchesAny(e.patterns, names) && !types.includes(e.keyType)) types.push(e.keyType);
  }
  return types;
}

/** The verdict on `key` of a host recorded under any of `names` (one host's names: their entries are all its own). */
export function verifyHostKey(entries: KnownHostEntry[], names: string | readonly string[], keyType: string, key: string): HostKeyVerdict {
  const mine = entries.filter((e) => matchesAny(e.patterns, names) || (e.marker === "revoked" && e.patterns === "*"));
  const revoked = mine.find((e) => e.marker === "revoked" && e.key === key);
  if (revoked !== undefined) return { kind: "revoked", line: revoked.line };
  const plain = mine.filter((e) => e.marker === undefined);
  if (plain.some((e) => e.keyType === keyType && e.key === key)) return { kind: "known" };
  const other = plain.find((e) => e.keyType === keyType);
  if (other !== undefined) return { kind: "changed", line: other.line, knownFingerprint: fingerprint(other.key) };
  if (plain.length > 0) return { kind: "other-types", knownTypes: [...new Set(plain.map((e) => e.keyType))] };
  return { kind: "unknown" };
}

function matchesAny(patterns: string, names: string | readonly string[]): boolean {
  return (typeof names === "string" ? [names] : names).some((name) => matchesHost(patterns, name));
}

/** OpenSSH's SHA256 fingerprint of a base64 key blob. */
export function fingerprint(keyBase64: string): string {
  return `SHA256:${createHash("sha256").update(Buffer.from(keyBase64, "base64")).digest("base64").replace(/=+$/, "")}`;
}

/** The key type written at the start of an SSH public key blob. */
export function keyTypeOf(blob: Buffer): string {
  const length = blob.readUInt32BE(0);
  return blob.subarray(4, 4 + length).toString("ascii");
}

/** A hashed host field as `ssh-keygen -H` writes it (tests and HashKnownHosts users). */
export function hashHostName(name: string, salt: Buffer): string {
  return `|1|${salt.toString("base64")}|${createHmac("sha1", salt).update(name).digest("base64")}`;
}

/** Record a key (accept-new). The file and its directory are created when missing (0600 / 0700). */
export async function appendKnownHost(path: string, name: string, keyType: string, key: string): Promise<void> {
  if (path === "/dev/null") return;
  await mkdir(dirname(path), { recursive: true, mode: 0o700 });
  const existing = await readSshFile(path, knownHostsWhat);
  const prefix = existing === "" || existing.endsWith("\n") ? "" : "\n";
  await appendFile(path, `${prefix}${name} ${keyType} ${key}\n`, { mode: 0o600 });
}
