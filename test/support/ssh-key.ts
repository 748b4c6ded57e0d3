/**
 * A fresh ed25519 private key in OpenSSH format, for tests that need a key file but no server that
 * knows it. ssh2's generator makes about one key in 250 that its own parser then refuses
 * ("Malformed OpenSSH private key"), so a key is kept only once it parses.
 */
import { utils } from "ssh2";

export function generatePrivateKey(): string {
  for (;;) {
    const key = utils.generateKeyPairSync("ed25519").private;
    if (!(utils.parseKey(key) instanceof Error)) return key;
  }
}
