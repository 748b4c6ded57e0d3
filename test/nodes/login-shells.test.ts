/**
 * sshd hands every command to the user's login shell, which may be no POSIX shell. The command
 * line shardctl sends (`anyShellRuns`) must reach `sh` as the same script from bash, dash, zsh and
 * fish alike, whatever the arguments hold: fish reads `\\` and `\'` inside single quotes as escapes,
 * and has no `$$`. Each shell runs the real line, with arguments that hold quotes, backslashes (a
 * last one too), `$`, backticks, globs and newlines.
 */
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { beforeAll, expect, it } from "vitest";
import { anyShellRuns, quoteArgv } from "../../src/nodes/index.js";
import { aptInstall } from "../support/apt.js";

const shells = ["/bin/bash", "/bin/dash", "/usr/bin/zsh", "/usr/bin/fish"];

beforeAll(async () => {
  const missing = [
    ["zsh", "/usr/bin/zsh"],
    ["fish", "/usr/bin/fish"],
  ].filter(([, path]) => !existsSync(path!));
  if (missing.length === 0) return;
  if (process.getuid?.() !== 0) throw new Error(`install ${missing.map(([pkg]) => `"${pkg}"`).join(" and ")} (apt-get install -y …)`);
  await aptInstall(missing.map(([pkg]) => pkg!));
}, 15 * 60_000);

const hostile = ["it's", "a b", "$HOME", "`id`", "$(id)", "back\\slash", "two\\\\", "quote\\'", "end\\", "*", "line\nbreak", "", "%s", "!x"];

it.each(shells)("%s runs the line as sh runs the script: every argument arrives as it was given, and $$ is the session's pid", async (shell) => {
  const script = `echo "pid $$"; exec ${quoteArgv(["sh", "-c", 'for a in "$@"; do printf "[%s]" "$a"; done', "sh", ...hostile])}`;
  let spawned: number | undefined;
  const stdout = await new Promise<string>((resolve, reject) => {
    const child = execFile(shell, ["-c", anyShellRuns(script)], (error, out) => (error === null ? resolve(out) : reject(error)));
    spawned = child.pid;
  });
  const [pidLine, rest] = [stdout.slice(0, stdout.indexOf("\n")), stdout.slice(stdout.indexOf("\n") + 1)];
  // The login shell's own process (sshd's session leader, which a deadline kills) runs the script.
  expect(pidLine).toBe(`pid ${spawned}`);
  expect(rest).toBe(hostile.map((a) => `[${a}]`).join(""));
});
