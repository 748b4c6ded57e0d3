/**
 * A host as settings and definitions write it: `local`, a hostname or ssh alias, or an IP address.
 * The pattern keeps out what could reach a shell; these checks say, in words that name the fix,
 * what passes the pattern or nearly does and still cannot work: text with ':' that is no IPv6
 * address (a port appended), an IPv4 address written as IPv6 (the engines take IPv4 as such), a
 * link-local address (it needs a zone, an interface of one machine, which means nothing to the
 * engines on the others), brackets, a zone, a trailing dot, `user@` or `:port`.
 */
import { isIPv6 } from "node:net";
import { z } from "zod";
import { allowed, patterns, quote } from "./patterns.js";

/** The schema of a host of at most `maxLength` characters. */
export function hostSchema(maxLength = 253): z.ZodString {
  return z
    .string()
    .max(maxLength, { error: `must be at most ${maxLength} characters` })
    .regex(patterns.host, { error: (issue) => `${quote(issue.input)} is not allowed: ${unwrittenHostProblem(String(issue.input)) ?? `expected ${allowed.host}`}` })
    .check((ctx) => {
      const problem = patterns.host.test(ctx.value) ? addressProblem(ctx.value) : undefined;
      if (problem !== undefined) ctx.issues.push({ code: "custom", input: ctx.value, message: `${quote(ctx.value)} ${problem}` });
    });
}

/** `address` in the form URLs and OpenSSH write it (lower case, zeros compressed) when it is an IPv6 address; else as given. */
export function canonicalHost(address: string): string {
  if (!isIPv6(address) || address.includes("%")) return address;
  return new URL(`http://[${address}]/`).hostname.slice(1, -1);
}

/** The IPv4 address an IPv4-mapped IPv6 address (`::ffff:10.0.0.5`) stands for; undefined for any other. */
export function ipv4OfMapped(address: string): string | undefined {
  const mapped = /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(canonicalHost(address));
  if (mapped === null) return undefined;
  const [high, low] = [parseInt(mapped[1]!, 16), parseInt(mapped[2]!, 16)];
  return [high >> 8, high & 255, low >> 8, low & 255].join(".");
}

/** Whether `address` is a link-local IPv6 address (fe80::/10), with or without a zone. */
export function isLinkLocalAddress(address: string): boolean {
  const bare = address.split("%")[0]!;
  return isIPv6(bare) && /^fe[89ab][0-9a-f]:/.test(canonicalHost(bare));
}

/** What is wrong with a host that matches the pattern, said after the value; undefined when nothing is. */
function addressProblem(host: string): string | undefined {
  if (!host.includes(":")) return undefined;
  if (!isIPv6(host)) {
    const port = /^(.*):(\d{1,5})$/.exec(host);
    if (port !== null && isIPv6(port[1]!)) return `is not an IPv6 address: it ends in a port? Write host = ${quote(port[1])} and port = ${port[2]}`;
    return "is not an IPv6 address: a host with ':' must be a whole IPv6 address, unbracketed, e.g. fd00::11";
  }
  const ipv4 = ipv4OfMapped(host);
  if (ipv4 !== undefined) return `is an IPv4 address written as IPv6: write ${quote(ipv4)}`;
  if (isLinkLocalAddress(host)) return `is a link-local address: it needs a zone (an interface of one machine, such as %eth0), ${elsewhere}`;
  return undefined;
}

const elsewhere = "which means nothing to the engines on the other nodes; give the node a ULA (fd00::/8), global or IPv4 address";

/** A specific word on a host the pattern refuses, when its mistake is a common one. */
function unwrittenHostProblem(host: string): string | undefined {
  const zone = host.indexOf("%");
  if (zone > 0 && isIPv6(host.slice(0, zone))) return `it has a zone (${host.slice(zone)}), an interface of one machine, ${elsewhere}`;
  if (/^\[.*\](:\d+)?$/.test(host)) return "write an IPv6 address without brackets, and the SSH port as port = …";
  if (host.includes("@")) return 'no "user@" in a host: the login name has its own key, user = …';
  if (/^[A-Za-z0-9.-]+:\d{1,5}$/.test(host)) return 'no ":port" in a host: the SSH port has its own key, port = …';
  if (host.endsWith(".") && patterns.host.test(host.slice(0, -1))) return `drop the trailing dot: write ${quote(host.slice(0, -1))}`;
  return undefined;
}
