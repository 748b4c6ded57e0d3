/**
 * Real headless Chromium for the dashboard's tests and bench: Debian's `chromium` package, driven
 * by playwright-core through its executablePath (no browser download). When the binary is missing
 * and we are root, the package is installed with apt-get (see apt.ts); otherwise set-up fails
 * naming the package. It never skips.
 *
 * As root, each browser runs in a network namespace of its own. Chromium cancels a navigation under
 * way (ERR_NETWORK_CHANGED, then its error page and a reload of its own) whenever the interfaces of
 * its network change, and the fault lab's files, running beside the browser's, add and remove veth
 * pairs and bridges in the root namespace. In its own namespace the browser sees none of that; a
 * bridge (netns-bridge.py) carries its connections to 127.0.0.0/8 to the same addresses and ports
 * in the root namespace, so the servers the tests start are where they always are.
 * No vitest imports (bench uses it too).
 */
import { execFile, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { chmod, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { chromium, type Browser } from "playwright-core";
import { aptInstall } from "./apt.js";
import { ensureTool, killNamespace, removeStaleNamespaces } from "./namespaces.js";

const run = promisify(execFile);

/** The browser binary itself; /usr/bin/chromium is Debian's wrapper script around it. */
const candidates = ["/usr/lib/chromium/chromium", "/usr/bin/chromium"];

/** Install Debian's chromium when missing (root only); throw naming the package otherwise. */
export async function ensureChromium(): Promise<string> {
  const found = candidates.find((c) => existsSync(c));
  if (found !== undefined) return found;
  if (process.getuid?.() !== 0) throw new Error(`chromium is missing: install Debian's "chromium" package (apt-get install -y chromium)`);
  await aptInstall(["chromium"]);
  const installed = candidates.find((c) => existsSync(c));
  if (installed === undefined) throw new Error(`installing "chromium" provided none of ${candidates.join(", ")}`);
  return installed;
}

/** Chromium's flags: as root it needs --no-sandbox (the sandbox refuses to run as root). */
const flags = ["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"];

/** Headless Chromium: as root in a network namespace of its own (see above), otherwise as it is. */
export async function launchChromium(): Promise<Browser> {
  const executablePath = await ensureChromium();
  if (process.getuid?.() !== 0) return chromium.launch({ executablePath, headless: true, args: flags });
  const isolation = await isolateNetwork(executablePath);
  try {
    const browser = await chromium.launch({ executablePath: isolation.executable, headless: true, args: flags });
    const close = browser.close.bind(browser);
    browser.close = async (options) => {
      await close(options);
      await isolation.remove();
    };
    return browser;
  } catch (error) {
    await isolation.remove();
    throw error;
  }
}

/** Namespaces are `swb<creator pid, base 36>-<n>`: a later launch removes those whose creator is gone (namespaces.ts). */
const prefix = "swb";
let launched = 0;
/** The bridge's port inside the namespace, where every loopback connection is redirected. */
const bridgePort = 1;

interface Isolation {
  /** A script that starts the browser inside the namespace (playwright's pipes pass through it). */
  executable: string;
  remove(): Promise<void>;
}

async function isolateNetwork(browserBinary: string): Promise<Isolation> {
  await ensureTool("/usr/sbin/ip", "iproute2");
  await ensureTool("/usr/sbin/iptables", "iptables");
  await removeStaleNamespaces(prefix);
  const ns = `${prefix}${process.pid.toString(36)}-${launched++}`;
  const dir = await mkdtemp(join(tmpdir(), "shardctl-browser-"));
  await run("ip", ["netns", "add", ns]);
  let bridge: ReturnType<typeof spawn> | undefined;
  const remove = async (): Promise<void> => {
    bridge?.kill("SIGKILL");
    await killNamespace(ns);
    await rm(dir, { recursive: true, force: true });
  };
  try {
    await run("ip", ["netns", "exec", ns, "ip", "link", "set", "lo", "up"]);
    await run("ip", [
      "netns",
      "exec",
      ns,
      "iptables",
      "-w",
      "-t",
      "nat",
      "-A",
      "OUTPUT",
      "-p",
      "tcp",
      "-d",
      "127.0.0.0/8",
      "-j",
      "REDIRECT",
      "--to-ports",
      String(bridgePort),
    ]);
    bridge = spawn("python3", [join(dirname(fileURLToPath(import.meta.url)), "netns-bridge.py"), `/run/netns/${ns}`, String(bridgePort)], {
      stdio: ["pipe", "pipe", "inherit"],
    });
    await new Promise<void>((resolve, reject) => {
      let said = "";
      bridge!.stdout!.on("data", (d: Buffer) => {
        said += d.toString();
        if (said.includes("ready")) resolve();
      });
      bridge!.once("error", reject);
      bridge!.once("exit", (code) => reject(new Error(`the browser's network bridge (test/support/netns-bridge.py) exited with ${code} before it was ready`)));
    });
    const executable = join(dir, "chromium-in-netns");
    await writeFile(executable, `#!/bin/sh\nexec /usr/sbin/ip netns exec '${ns}' '${browserBinary}' "$@"\n`);
    await chmod(executable, 0o755);
    return { executable, remove };
  } catch (error) {
    await remove();
    throw error;
  }
}
