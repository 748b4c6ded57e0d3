/**
 * An SSH node whose every question fails at once: nothing listens at its SSH port (1), so each
 * connection is refused. What a health test needs of a node that cannot be asked, without a server.
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { NodePool, type NodeAccess } from "../../src/nodes/index.js";
import { generatePrivateKey } from "./ssh-key.js";

/**
 * A node named `name` at `host`, port 1; what it made (a key folder, a pool) is closed by the
 * functions it pushes onto `closers`. `connectDeadlineMs` is the pool's (default 500).
 */
export async function refusingSshNode(name: string, host: string, closers: Array<() => Promise<void>>, connectDeadlineMs = 500): Promise<NodeAccess> {
  const keys = await mkdtemp(join(tmpdir(), "shardctl-refusing-node-"));
  closers.push(() => rm(keys, { recursive: true, force: true }));
  await writeFile(join(keys, "id_ed25519"), generatePrivateKey(), { mode: 0o600 });
  const pool = new NodePool({ knownHostsPath: join(keys, "known_hosts"), sshConfigPath: join(keys, "none"), connectDeadlineMs });
  closers.push(() => pool.close());
  return pool.get({ name, host, port: 1, user: "nobody", identityFile: join(keys, "id_ed25519"), hostKeyPolicy: "accept-new", modelDir: keys });
}
