/**
 * An address engines on other machines can dial, from the one SSH reached or a name resolved to. An
 * IPv4 address written as IPv6 (`::ffff:10.0.0.5`, as a dual-stack socket reports an IPv4 peer, or
 * an ssh config's HostName gives it) is given as the IPv4 address it is: engines parse IPv4 as such.
 * A link-local IPv6 address is refused: it needs a zone, an interface of one machine, which means
 * nothing to the engines on another. Other IPv6 addresses are written the one way URLs write them.
 */
import { ShardctlError } from "../errors/index.js";
import { canonicalHost, ipv4OfMapped, isLinkLocalAddress } from "../spec/index.js";

export function engineAddressOf(nodeName: string, address: string): string {
  if (isLinkLocalAddress(address) || address.includes("%")) {
    const what = isLinkLocalAddress(address) ? "the link-local address" : "an address with a zone,";
    throw new ShardctlError(
      "NodeAddressUnusable",
      `node ${nodeName}: it is reached at ${what} ${address} (its host, its ssh config's HostName, or what its name resolves to); a zone is an interface of one machine and means nothing to the engines on the other nodes: give the node a ULA (fd00::/8), global or IPv4 address without a zone`,
      { terminal: true },
    );
  }
  return ipv4OfMapped(address) ?? canonicalHost(address);
}
