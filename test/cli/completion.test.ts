/**
 * `shardctl completion bash|zsh`: the scripts the built CLI prints, loaded into real shells. bash
 * runs the completion function as readline would call it (COMP_WORDS, COMP_CWORD); zsh (installed
 * with apt-get when missing, as root) completes for real on a pseudo-terminal: compinit, the script
 * sourced, a line typed and Tab pressed, and the list it shows read back.
 */
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { commandTable } from "../../src/cli/help/index.js";
import { conditionTypes } from "../../src/reconciler/index.js";
import { requireBuild, runFile, shardctl } from "./support/run-shardctl.js";
import { aptInstall } from "../support/apt.js";

let dir: string;
let bashScript: string;
let zshScript: string;

beforeAll(async () => {
  requireBuild();
  dir = await mkdtemp(join(tmpdir(), "shardctl-completion-"));
  // A working directory as an operator has it: definitions, their status files, another directory.
  await mkdir(join(dir, "clusters"));
  await mkdir(join(dir, "elsewhere"));
  await writeFile(join(dir, "shardctl.toml"), "");
  for (const file of ["clusters/llama.toml", "clusters/qwen.toml", "clusters/llama.status.json", "elsewhere/mistral.toml"]) await writeFile(join(dir, file), "");
  for (const shell of ["bash", "zsh"]) {
    const run = await shardctl(["completion", shell]);
    expect(run, shell).toMatchObject({ code: 0, stderr: "" });
    await writeFile(join(dir, `completion.${shell}`), run.stdout);
  }
  bashScript = join(dir, "completion.bash");
  zshScript = join(dir, "completion.zsh");
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe("shardctl completion", () => {
  it("refuses a shell it has no script for, naming the ones it has", async () => {
    expect(await shardctl(["completion", "fish"])).toEqual({ code: 1, stdout: "", stderr: 'shardctl: completion: no completion for "fish"; the shells are bash, zsh\n' });
    expect((await shardctl(["completion"])).code).toBe(1);
  });
});

describe("bash completion", () => {
  /** What `_shardctl` offers for the words of a line, the last one being the word under the cursor. */
  async function complete(...words: string[]): Promise<string[]> {
    const script = [
      `source ${JSON.stringify(bashScript)}`,
      `COMP_WORDS=(${words.map((w) => `'${w}'`).join(" ")})`,
      `COMP_CWORD=${words.length - 1}`,
      `COMP_LINE=${JSON.stringify(words.join(" "))}`,
      "COMP_POINT=${#COMP_LINE}",
      "_shardctl",
      `printf '%s\\n' "\${COMPREPLY[@]}"`,
    ].join("\n");
    const run = await runFile("bash", ["--norc", "--noprofile", "-c", script], { cwd: dir });
    expect(run, words.join(" ")).toMatchObject({ code: 0, stderr: "" });
    return run.stdout.split("\n").filter((line) => line !== "");
  }

  it("registers _shardctl for shardctl", async () => {
    const run = await runFile("bash", ["--norc", "--noprofile", "-c", `source ${JSON.stringify(bashScript)} && complete -p shardctl`], { cwd: dir });
    expect(run).toEqual({ code: 0, stdout: "complete -F _shardctl shardctl\n", stderr: "" });
  });

  it("completes the commands of the table, and a prefix to its command", async () => {
    expect(await complete("shardctl", "")).toEqual([...commandTable.map((command) => command.name), "--help", "--version"]);
    expect(await complete("shardctl", "st")).toEqual(["status", "stage"]);
  });

  it("completes the cluster names of clusters/*.toml, or of --dir", async () => {
    expect(await complete("shardctl", "plan", "")).toEqual(["llama", "qwen"]);
    expect(await complete("shardctl", "wait", "q")).toEqual(["qwen"]);
    expect(await complete("shardctl", "status", "--dir", "elsewhere", "")).toEqual(["mistral"]);
    // `--dir=elsewhere`, which bash splits at "=".
    expect(await complete("shardctl", "plan", "--dir", "=", "elsewhere", "")).toEqual(["mistral"]);
  });

  it("completes a command's flags from the table", async () => {
    const wait = commandTable.find((command) => command.name === "wait")!;
    expect(await complete("shardctl", "wait", "llama", "--")).toEqual([...wait.flags.map((flag) => flag.name), "--help"]);
    expect(await complete("shardctl", "daemon", "--t")).toEqual(["--teardown-on-exit"]);
  });

  it("completes flag values: fixed words, conditions, files and directories", async () => {
    expect(await complete("shardctl", "daemon", "--log-format", "")).toEqual(["json", "pretty"]);
    expect(await complete("shardctl", "router", "--log-format", "=", "p")).toEqual(["pretty"]);
    expect(await complete("shardctl", "wait", "llama", "--for", "")).toEqual(conditionTypes.map((type) => `condition=${type}`));
    expect(await complete("shardctl", "wait", "llama", "--for", "condition", "=", "St")).toEqual(["Stalled", "Staged", "StagesListening"]);
    expect(await complete("shardctl", "plan", "--config", "sh")).toEqual(["shardctl.toml"]);
    expect((await complete("shardctl", "plan", "--dir", "")).sort()).toEqual(["clusters", "elsewhere"]);
    expect(await complete("shardctl", "wait", "llama", "--timeout", "")).toEqual([]);
  });

  it("completes the operands that are words: help's commands, completion's shells, service's actions", async () => {
    expect(await complete("shardctl", "help", "st")).toEqual(["status", "stage"]);
    expect(await complete("shardctl", "completion", "")).toEqual(["bash", "zsh"]);
    expect(await complete("shardctl", "service", "")).toEqual(["install", "uninstall", "status"]);
  });
});

describe("zsh completion", () => {
  beforeAll(async () => {
    await ensureZsh();
  }, 300_000);

  it("parses, and defines _shardctl for shardctl after compinit", async () => {
    expect(await runFile("zsh", ["-n", zshScript])).toEqual({ code: 0, stdout: "", stderr: "" });
    const run = await runFile(
      "zsh",
      ["-f", "-c", `autoload -Uz compinit && compinit -u -D && source ${zq(zshScript)} && whence -w _shardctl && print -r -- $_comps[shardctl]`],
      {
        cwd: dir,
      },
    );
    expect(run).toEqual({ code: 0, stdout: "_shardctl: function\n_shardctl\n", stderr: "" });
  });

  it("lists the commands, the cluster names, --dir's cluster names, flags and flag values on Tab", async () => {
    const commands = await tab("shardctl ");
    for (const command of commandTable) expect(commands, command.name).toContain(command.name);

    const clusters = await tab("shardctl plan ");
    expect(clusters).toContain("llama");
    expect(clusters).toContain("qwen");
    expect(clusters).not.toContain("mistral");
    expect(await tab("shardctl status --dir elsewhere ")).toContain("mistral");

    const flags = await tab("shardctl daemon --");
    for (const flag of ["--teardown-on-exit", "--log-format", "--config", "--dir"]) expect(flags, flag).toContain(flag);

    const conditions = await tab("shardctl wait llama --for ");
    for (const type of conditionTypes) expect(conditions, type).toContain(`condition=${type}`);
    expect(await tab("shardctl completion ")).toEqual(expect.arrayContaining(["bash", "zsh"]));
  }, 120_000);
});

/**
 * The words zsh shows after `line` and a Tab: an interactive zsh on a pseudo-terminal (zpty), with
 * compinit and the script loaded, types the line, presses Tab, then runs a command that prints a
 * marker; what the terminal showed in between, escape sequences removed, split into words.
 */
async function tab(line: string): Promise<string[]> {
  const driver = join(dir, "tab.zsh");
  await writeFile(
    driver,
    `zmodload zsh/zpty zsh/datetime
zpty shell zsh -f -i
# Everything the terminal shows until $1 appears, or 20 s pass.
read_until() {
  local text= chunk deadline=$(( EPOCHREALTIME + 20 ))
  while (( EPOCHREALTIME < deadline )); do
    if zpty -r -t shell chunk; then text+=$chunk; [[ $text == *$1* ]] && break; else sleep 0.05; fi
  done
  REPLY=$text
}
# The list on the first Tab, even when the candidates share a prefix (LIST_AMBIGUOUS would insert it silently).
zpty -w shell 'PS1="> "; unsetopt list_ambiguous; zstyle ":completion:*" list-prompt ""; LISTMAX=0; autoload -Uz compinit; compinit -u -D; source $COMPLETION_SCRIPT; print SET""UP-DONE'
read_until SETUP-DONE
zpty -w -n shell $1$'\\t'
sleep 0.3
# Ctrl-U drops the line; the marker is printed only when this command runs, after the list.
zpty -w shell $'\\C-uprint TAB""-DONE'
read_until TAB-DONE
print -r -- $REPLY
zpty -d shell
`,
  );
  // The shell on the terminal inherits the working directory (the clusters) and the script's path.
  const run = await runFile("zsh", ["-f", driver, line], { cwd: dir, env: { ...process.env, COMPLETION_SCRIPT: zshScript }, timeoutMs: 60_000 });
  expect(run, line).toMatchObject({ code: 0, stderr: "" });
  expect(run.stdout, line).toContain("TAB-DONE");
  // eslint-disable-next-line no-control-regex
  const plain = run.stdout.replace(/\x1b\[[0-9;?]*[A-Za-z]/g, " ").replace(/[\x00-\x1f]/g, " ");
  return plain
    .slice(plain.indexOf(line.trimEnd()) + line.trimEnd().length, plain.lastIndexOf("TAB-DONE"))
    .split(/\s+/)
    .filter(Boolean);
}

/** A single-quoted zsh word. */
function zq(text: string): string {
  return `'${text.replaceAll("'", `'\\''`)}'`;
}

/** zsh, installed with apt-get when missing (the tests run as root); otherwise fail naming the package. */
async function ensureZsh(): Promise<void> {
  const found = ["/usr/bin/zsh", "/bin/zsh", "/usr/local/bin/zsh"].some((path) => existsSync(path));
  if (found) return;
  if (process.getuid?.() !== 0) throw new Error('zsh is missing: install the "zsh" package (apt-get install -y zsh)');
  await aptInstall(["zsh"]);
}
