/**
 * Real headless Chromium for the dashboard's tests and bench: Debian's `chromium` package, driven
 * by playwright-core through its executablePath (no browser download). When the binary is missing
 * and we are root, the package is installed with apt-get (see apt.ts); otherwise set-up fails
 * naming the package. It never skips.
 * No vitest imports (bench uses it too).
 */
import { existsSync } from "node:fs";
import { chromium, type Browser } from "playwright-core";
import { aptInstall } from "./apt.js";

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

/** Headless Chromium; as root it needs --no-sandbox (the sandbox refuses to run as root). */
export async function launchChromium(): Promise<Browser> {
  const executablePath = await ensureChromium();
  return chromium.launch({ executablePath, headless: true, args: ["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"] });
}
