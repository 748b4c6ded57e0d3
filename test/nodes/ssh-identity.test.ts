/**
 * A passphrase-protected identity file, the usual set-up of a person's own key: OpenSSH then asks
 * ssh-agent, which holds the unlocked key. Against a real sshd and a real ssh-agent: with the agent
 * the node answers; without one, or with one lacking the key, the failure says the key is locked and
 * how to load it. A file that is no key at all fails for good, naming it; one that cannot be read is
 * named in the failure.
 */
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { appendFile, chmod, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, expect, it } from "vitest";
import { NodePool } from "../../src/nodes/index.js";
import { startSshdNodes, type SshdSet } from "../support/sshd.js";

const run = promisify(execFile);
let sshd: SshdSet;
let key: string;
let agent: ChildProcess | undefined;
const pools: NodePool[] = [];

beforeAll(async () => {
  sshd = await startSshdNodes({ count: 1 });
  key = join(sshd.root, "encrypted_ed25519");
  await run("ssh-keygen", ["-q", "-t", "ed25519", "-N", "a passphrase", "-C", "encrypted", "-f", key]);
  // sshd reads its AuthorizedKeysFile at each login.
  await appendFile(join(sshd.root, "authorized_keys"), await readFile(`${key}.pub`, "utf8"));
}, 60_000);

afterAll(async () => {
  await Promise.all(pools.map((p) => p.close()));
  agent?.kill();
  await sshd?.close();
});

function nodeThrough(agentSocket: string | undefined, identityFile = key) {
  const pool = new NodePool({ knownHostsPath: sshd.knownHostsPath, sshConfigPath: join(sshd.root, "none"), ...(agentSocket === undefined ? {} : { agentSocket }) });
  pools.push(pool);
  const n = sshd.nodes[0]!;
  return pool.get({ name: n.name, host: n.host, port: n.port, user: n.user, identityFile, hostKeyPolicy: "strict", modelDir: n.modelDir });
}

type LoginFailure = Error & { reason?: string; terminal?: boolean };

/** How a login with `identityFile` fails with no ssh-agent (SSH_AUTH_SOCK unset meanwhile); undefined if it succeeds. */
async function failedLoginWithoutAgent(identityFile = key): Promise<LoginFailure | undefined> {
  const saved = process.env.SSH_AUTH_SOCK;
  delete process.env.SSH_AUTH_SOCK;
  try {
    return await nodeThrough(undefined, identityFile)
      .run(["true"])
      .then(
        () => undefined,
        (e: LoginFailure) => e,
      );
  } finally {
    if (saved !== undefined) process.env.SSH_AUTH_SOCK = saved;
  }
}

it("without an agent, an encrypted identity file fails naming the file and what to do", async () => {
  const error = await failedLoginWithoutAgent();
  expect(error?.reason).toBe("SshAuthFailed");
  expect(error?.terminal).toBe(true);
  expect(error?.message).toContain(key);
  expect(error?.message).toMatch(/passphrase/);
  expect(error?.message).toMatch(/ssh-add/);
});

it("with the key unlocked in ssh-agent the node answers; with an agent that lacks it the failure names the key", async () => {
  const socket = join(sshd.root, "agent.sock");
  agent = spawn("ssh-agent", ["-D", "-a", socket], { stdio: "ignore" });
  for (
    let i = 0;
    i < 50 &&
    !(await run("test", ["-S", socket]).then(
      () => true,
      () => false,
    ));
    i++
  )
    await new Promise((r) => setTimeout(r, 100));
  // ssh-add reads the passphrase from SSH_ASKPASS when told to (no terminal here).
  const askpass = join(sshd.root, "askpass");
  await writeFile(askpass, "#!/bin/sh\necho 'a passphrase'\n");
  await chmod(askpass, 0o700);
  // An agent without the key: the failure says which key is locked and how to add it.
  const refused = await nodeThrough(socket)
    .run(["true"])
    .then(
      () => undefined,
      (e: Error & { reason?: string }) => e,
    );
  expect(refused?.reason).toBe("SshAuthFailed");
  expect(refused?.message).toContain(`ssh-add ${key}`);
  await run("ssh-add", [key], { env: { ...process.env, SSH_AUTH_SOCK: socket, SSH_ASKPASS: askpass, SSH_ASKPASS_REQUIRE: "force", DISPLAY: "none" } });
  const result = await nodeThrough(socket).run(["echo", "answered"]);
  expect(result.stdout.trim()).toBe("answered");
  // identity_file naming the public half (how a key kept in an agent is often named) goes to the agent too.
  const publicHalf = await nodeThrough(socket, `${key}.pub`).run(["echo", "answered"]);
  expect(publicHalf.stdout.trim()).toBe("answered");
});

// Regression: an identity_file that does not exist was passed over in silence, and the failure
// named only what else was tried (or "no usable identity file") — not the typo in the settings.
it("an identity_file that cannot be read is named in the failure; an agent holding a key still logs in", async () => {
  const missing = join(sshd.root, "no-such-key");
  const error = await failedLoginWithoutAgent(missing);
  expect(error?.reason).toBe("SshAuthFailed");
  expect(error?.terminal).toBe(true);
  expect(error?.message).toContain(`identity_file ${missing} cannot be read (ENOENT: no such file or directory)`);
  // The agent of the test before holds the unlocked key: as OpenSSH does, it is asked in place of the file.
  const result = await nodeThrough(join(sshd.root, "agent.sock"), missing).run(["echo", "answered"]);
  expect(result.stdout.trim()).toBe("answered");
});

it("a public key as identity_file, without an agent, fails naming it", async () => {
  const error = await failedLoginWithoutAgent(`${key}.pub`);
  expect(error?.reason).toBe("SshAuthFailed");
  expect(error?.terminal).toBe(true);
  expect(error?.message).toContain(`identity_file ${key}.pub is not a private key shardctl can use (it is a public key)`);
});

it("an identity file that is no private key fails naming it, at once and for good", async () => {
  const notAKey = join(sshd.root, "not-a-key");
  await writeFile(notAKey, "-----BEGIN NOTHING-----\nxyz\n");
  const pool = new NodePool({ knownHostsPath: sshd.knownHostsPath, sshConfigPath: join(sshd.root, "none") });
  pools.push(pool);
  const n = sshd.nodes[0]!;
  const node = pool.get({ name: n.name, host: n.host, port: n.port, user: n.user, identityFile: notAKey, hostKeyPolicy: "strict", modelDir: n.modelDir });
  const error = await node.run(["true"]).then(
    () => undefined,
    (e: Error & { reason?: string; terminal?: boolean }) => e,
  );
  expect(error?.reason).toBe("SshAuthFailed");
  expect(error?.terminal).toBe(true);
  expect(error?.message).toContain(`identity_file ${notAKey} is not a private key`);
});

// Regression: a key the server does not accept failed with ssh2's "All configured authentication
// methods failed" alone, which names neither the key offered nor where it must be accepted.
it("a key the server does not accept fails naming the key, the user and how to install it", async () => {
  const stranger = join(sshd.root, "stranger_ed25519");
  await run("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-C", "stranger", "-f", stranger]);
  const n = sshd.nodes[0]!;
  const error = await failedLoginWithoutAgent(stranger);
  expect(error?.reason).toBe("SshAuthFailed");
  expect(error?.terminal).toBe(true);
  expect(error?.message).toBe(
    `node ${n.name}: authentication as ${n.user} failed: All configured authentication methods failed; ` +
      `${n.host} accepted none of what was offered (identity_file ${stranger}) for ${n.user}: add the public key to ${n.user}'s ~/.ssh/authorized_keys there ` +
      `(ssh-copy-id -i ${stranger}.pub -p ${n.port} ${n.user}@${n.host}), or correct user or identity_file in [nodes.${n.name}]`,
  );
});

/** An ssh-agent of its own at `socket`, once its socket exists. */
async function startAgent(socket: string): Promise<ChildProcess> {
  const child = spawn("ssh-agent", ["-D", "-a", socket], { stdio: "ignore" });
  for (let i = 0; i < 50; i++) {
    const up = await run("test", ["-S", socket]).then(
      () => true,
      () => false,
    );
    if (up) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  return child;
}

// Regression: only the first usable identity file was offered, where OpenSSH offers each in turn;
// a `Host *` IdentityFile listed before the host's own hid it.
it("every identity file of the ssh config is offered in turn: one the node refuses before the one it accepts", async () => {
  const refusedKey = join(sshd.root, "refused_ed25519");
  const acceptedKey = join(sshd.root, "accepted_ed25519");
  await run("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-C", "refused", "-f", refusedKey]);
  await run("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-C", "accepted", "-f", acceptedKey]);
  await appendFile(join(sshd.root, "authorized_keys"), await readFile(`${acceptedKey}.pub`, "utf8"));
  const n = sshd.nodes[0]!;
  const config = join(sshd.root, "two-identities.conf");
  await writeFile(config, `Host *\n  IdentityFile ${refusedKey}\nHost ${n.host}\n  IdentityFile ${acceptedKey}\n`);
  const saved = process.env.SSH_AUTH_SOCK;
  delete process.env.SSH_AUTH_SOCK;
  try {
    const pool = new NodePool({ knownHostsPath: sshd.knownHostsPath, sshConfigPath: config });
    pools.push(pool);
    const node = pool.get({ name: n.name, host: n.host, port: n.port, user: n.user, hostKeyPolicy: "strict", modelDir: n.modelDir });
    expect((await node.run(["echo", "answered"])).stdout.trim()).toBe("answered");
  } finally {
    if (saved !== undefined) process.env.SSH_AUTH_SOCK = saved;
  }
});

// Regression: an agent holding more keys than the server's MaxAuthTries (6) offered them in its own
// order, and the node cut it off ("Too many authentication failures") before the identity_file's key.
it("an agent with many keys offers the identity_file's key first", async () => {
  const socket = join(sshd.root, "many.sock");
  const many = await startAgent(socket);
  try {
    const env = { ...process.env, SSH_AUTH_SOCK: socket };
    for (let i = 0; i < 7; i++) {
      const other = join(sshd.root, `other_${i}`);
      await run("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-C", `other ${i}`, "-f", other]);
      await run("ssh-add", ["-q", other], { env });
    }
    const askpass = join(sshd.root, "askpass");
    await run("ssh-add", ["-q", key], { env: { ...env, SSH_ASKPASS: askpass, SSH_ASKPASS_REQUIRE: "force", DISPLAY: "none" } });
    const listed = (await run("ssh-add", ["-l"], { env })).stdout.trim().split("\n");
    // The identity_file's key is the agent's last of eight.
    expect(listed).toHaveLength(8);
    expect(listed.at(-1)).toContain("encrypted");
    const result = await nodeThrough(socket).run(["echo", "answered"]);
    expect(result.stdout.trim()).toBe("answered");
  } finally {
    many.kill();
  }
});

it("an SSH_AUTH_SOCK naming no running agent is an authentication failure that says so", async () => {
  const stale = join(sshd.root, "gone.sock");
  const missing = join(sshd.root, "no-such-key-either");
  const error = await nodeThrough(stale, missing)
    .run(["true"])
    .then(
      () => undefined,
      (e: LoginFailure) => e,
    );
  expect(error?.reason).toBe("SshAuthFailed");
  expect(error?.message).toContain(`SSH_AUTH_SOCK (${stale}) names no running ssh-agent`);
});

// Regression: keys offered from their files were offered again from the agent, and the server's
// MaxAuthTries (6) was spent on three keys twice before the agent's fourth, the one it accepts.
it("a key offered from its file is not offered again from the agent", async () => {
  const socket = join(sshd.root, "twice.sock");
  const twice = await startAgent(socket);
  try {
    const env = { ...process.env, SSH_AUTH_SOCK: socket };
    const refused: string[] = [];
    for (let i = 0; i < 3; i++) {
      const path = join(sshd.root, `refused_twice_${i}`);
      await run("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-C", `refused twice ${i}`, "-f", path]);
      await run("ssh-add", ["-q", path], { env });
      refused.push(path);
    }
    const accepted = join(sshd.root, "accepted_by_agent");
    await run("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-C", "accepted by agent", "-f", accepted]);
    await appendFile(join(sshd.root, "authorized_keys"), await readFile(`${accepted}.pub`, "utf8"));
    await run("ssh-add", ["-q", accepted], { env });
    const n = sshd.nodes[0]!;
    const config = join(sshd.root, "three-identities.conf");
    await writeFile(config, `Host ${n.host}\n${refused.map((p) => `  IdentityFile ${p}\n`).join("")}`);
    const pool = new NodePool({ knownHostsPath: sshd.knownHostsPath, sshConfigPath: config, agentSocket: socket });
    pools.push(pool);
    const node = pool.get({ name: n.name, host: n.host, port: n.port, user: n.user, hostKeyPolicy: "strict", modelDir: n.modelDir });
    expect((await node.run(["echo", "answered"])).stdout.trim()).toBe("answered");
  } finally {
    twice.kill();
  }
});
