/**
 * Every shardctl command, described once: its purpose, usage, flags and their defaults, exit codes
 * and one example. `shardctl help`, `<command> --help`, the shell completions and the registry of
 * command modules (src/cli/shardctl.ts, keyed by `CommandName`) all come from this table, and a test
 * holds README.md's command table to it.
 */

/** What a word on the command line completes to. */
export type Completion =
  /** Names of the definitions in the clusters directory (`clusters/*.toml`, or `--dir`). */
  | { kind: "cluster" }
  /** Any file (directories too, to walk into). */
  | { kind: "file" }
  | { kind: "dir" }
  /** One of a fixed list. */
  | { kind: "words"; words: readonly string[] }
  /** A condition of the status file, as `condition=<Type>`. */
  | { kind: "condition" }
  /** A shardctl command. */
  | { kind: "command" }
  /** Free text (a number, a duration, an address): nothing to offer. */
  | { kind: "none" };

export interface FlagSpec {
  /** The long form, `--json`. */
  readonly name: string;
  /** The short form, `-w`, when there is one. */
  readonly short?: string;
  /** The placeholder of its value (`<file>`); absent for a switch. */
  readonly value?: string;
  /** What it does, one line. */
  readonly description: string;
  /** Its default as a person would write it; absent for a switch (off) or when there is none. */
  readonly default?: string;
  /** What its value completes to (default: nothing). */
  readonly complete?: Completion;
}

export interface ExitCode {
  readonly code: number;
  readonly meaning: string;
}

export interface CommandSpec {
  readonly name: string;
  /** One line: what the command is for. */
  readonly purpose: string;
  /** The synopsis, beginning `shardctl <name>`; README's command table shows it verbatim. */
  readonly usage: string;
  /** More to know, one paragraph per entry (optional). */
  readonly details?: readonly string[];
  /** What its operands (the words that are not flags) complete to. */
  readonly operands: Completion;
  readonly flags: readonly FlagSpec[];
  readonly exitCodes: readonly ExitCode[];
  readonly example: string;
}

const configFlag = {
  name: "--config",
  value: "<file>",
  description: "the settings file, with the node registry",
  default: "shardctl.toml",
  complete: { kind: "file" },
} as const satisfies FlagSpec;

const dirFlag = {
  name: "--dir",
  value: "<dir>",
  description: "the directory of cluster definitions",
  default: "clusters/ beside the settings file",
  complete: { kind: "dir" },
} as const satisfies FlagSpec;

const logFormatFlag = {
  name: "--log-format",
  value: "<json|pretty>",
  description: "log lines for people (pretty; coloured as Node decides: FORCE_COLOR when set, else off with NO_COLOR) or for machines (one JSON object a line)",
  default: "pretty on a terminal, json otherwise",
  complete: { kind: "words", words: ["json", "pretty"] },
} as const satisfies FlagSpec;

const jsonFlag = { name: "--json", description: "print JSON instead of a table" } as const satisfies FlagSpec;

/** Everything that reads settings and definitions takes these two. */
const contextFlags = [configFlag, dirFlag] as const;

/** The order people meet the commands in: check, preview, run, watch, operate, tools. */
export const commandTable = [
  {
    name: "validate",
    purpose: "check cluster definitions and settings; print every problem as file:line:col",
    usage: "shardctl validate [paths…]",
    details: [
      "Without paths it checks the settings file and the definitions directory (--dir, default clusters/ beside the settings), as the daemon would read them; a directory that does not exist is refused, as the daemon refuses it.",
      "Directories contribute their *.toml files (not recursive). Definitions are checked against the node registry of the settings file, which is validated too; a shardctl.toml named or found in a directory, or a file named under another name that holds settings tables ([nodes.<name>], [daemon], …), is validated as settings and counted apart.",
    ],
    operands: { kind: "file" },
    flags: [...contextFlags],
    exitCodes: [
      { code: 0, meaning: "every file is valid" },
      { code: 1, meaning: "a problem in some file (each printed as file:line:col: path: message), no definitions directory, or a usage error" },
    ],
    example: "shardctl validate shardctl.toml clusters",
  },
  {
    name: "plan",
    purpose: "preview the shard plan of cluster definitions (read-only)",
    usage: "shardctl plan <cluster…> [--json|--markdown] [--detailed-exitcode] [--probe]",
    details: [
      "Budgets come from the registry's declared memory; --probe asks the nodes (free memory, accelerator, engine version) as the daemon does when distributed serving is on, and caps what each reports by its declared memory. Each stage's SOURCE says which figure decided; without --probe the daemon's last budgets are shown too.",
    ],
    operands: { kind: "cluster" },
    flags: [
      jsonFlag,
      { name: "--markdown", description: "print each plan as Markdown (for a pull request comment)" },
      {
        name: "--detailed-exitcode",
        description:
          "exit 2 when a feasible plan's split (nodes and layer ranges) differs from the one the status file beside the definition records, or there is none; `diff` (which compares with what runs under the cluster's name) shows every other change",
      },
      { name: "--probe", description: "budget with what the nodes report, capped by their declared memory, as the daemon does" },
      ...contextFlags,
    ],
    exitCodes: [
      { code: 0, meaning: "every plan is feasible" },
      { code: 1, meaning: "a definition is invalid or a plan is infeasible" },
      { code: 2, meaning: "(with --detailed-exitcode) a plan's split differs from the status file's, or there is no status file" },
    ],
    example: "shardctl plan llama --markdown",
  },
  {
    name: "diff",
    purpose: "show what the daemon would change: desired vs running",
    usage: "shardctl diff [file…] [--probe]",
    details: [
      "Decided by the daemon's own decision table from the definitions, the ledger of what runs and the status files; it probes no process. Without files, the whole directory (what runs without a definition is pruned).",
      "Plans are budgeted from the registry's declared memory; --probe budgets them as the daemon does (with distributed serving on, what each node reports, capped by its declared memory). A line (budgets: …) says which budgets its plans were made with.",
    ],
    operands: { kind: "cluster" },
    flags: [{ name: "--probe", description: "budget plans as the daemon does: probe the nodes when distributed serving is on" }, ...contextFlags],
    exitCodes: [
      { code: 0, meaning: "the daemon would change nothing" },
      { code: 1, meaning: "an error (an invalid definition, a plan that cannot be made)" },
      { code: 2, meaning: "the daemon would change something (one line each: + launch, ~ replace, - stop)" },
    ],
    example: "shardctl diff clusters/llama.toml",
  },
  {
    name: "daemon",
    purpose: "watch cluster definitions and converge what runs to them",
    usage: "shardctl daemon [--dir clusters] [--config shardctl.toml] [--teardown-on-exit] [--log-format json|pretty]",
    details: [
      "Watches *.toml in the directory and the settings file; writes <name>.status.json beside each. One daemon per directory, whoever runs it (its lock is .shardctl-daemon.lock in the directory).",
      "SIGINT, SIGTERM and SIGHUP (its terminal closed) stop watching and leave the clusters running, unless --teardown-on-exit.",
      "A directory given through a symbolic link that comes to lead elsewhere (a swapped `current` link) is followed: the daemon starts again on the new target.",
    ],
    operands: { kind: "none" },
    flags: [...contextFlags, { name: "--teardown-on-exit", description: "tear every cluster down on SIGINT, SIGTERM or SIGHUP" }, logFormatFlag],
    exitCodes: [
      { code: 0, meaning: "stopped by SIGINT, SIGTERM or SIGHUP" },
      {
        code: 1,
        meaning:
          "could not start (settings, lock, directory), or another daemon took the directory's lock while its lock file was gone (the clusters keep running for that one)",
      },
    ],
    example: "shardctl daemon --dir clusters --config shardctl.toml",
  },
  {
    name: "status",
    purpose: "show cluster health from the status files (one line each, or one cluster's stages)",
    usage: "shardctl status [name] [--json] [--watch]",
    details: [
      "A stage's PID is its process group's leader: a shell that runs the engine and records how it ends, which ignores TERM itself. Signal the group: kill -- -<PID>.",
    ],
    operands: { kind: "cluster" },
    flags: [jsonFlag, { name: "--watch", short: "-w", description: "redraw in place every second until Ctrl-C" }, ...contextFlags],
    exitCodes: [
      { code: 0, meaning: "the status was shown" },
      { code: 1, meaning: "no such cluster, a status file that exists but cannot be read (it is named), or a usage error" },
    ],
    example: "shardctl status llama --watch",
  },
  {
    name: "wait",
    purpose: "wait until a cluster's condition holds at a revision (for CI)",
    usage: "shardctl wait <name> --for condition=Ready [--revision HEAD|<rev>] [--timeout 10m]",
    details: ["A Ready of an earlier revision never satisfies it."],
    operands: { kind: "cluster" },
    flags: [
      { name: "--for", value: "condition=<Type>", description: "the condition to wait for", default: "condition=Ready", complete: { kind: "condition" } },
      {
        name: "--revision",
        value: "<HEAD|rev>",
        description: "HEAD (the definition as it is on disk now), a full revision or the prefix `status` prints",
        default: "HEAD",
        complete: { kind: "words", words: ["HEAD"] },
      },
      { name: "--timeout", value: "<duration>", description: "give up after this long, like 30s, 10m or 1h30m", default: "10m", complete: { kind: "none" } },
      ...contextFlags,
    ],
    exitCodes: [
      { code: 0, meaning: "the condition holds at that revision" },
      {
        code: 1,
        meaning:
          "timed out, the cluster is Stalled at that revision, the definition is invalid, or it can never get there (stopped, suspended, distributed serving off): at once",
      },
    ],
    example: "shardctl wait llama --for condition=Ready --timeout 15m",
  },
  {
    name: "reconcile",
    purpose: "ask the daemon to reconcile a cluster now (resets its restart budget)",
    usage: "shardctl reconcile <name>",
    details: ["Returns once the daemon took the request, so a `wait` right after never reads the Stalled the request lifts."],
    operands: { kind: "cluster" },
    flags: [...contextFlags],
    exitCodes: [
      { code: 0, meaning: "the daemon took the request" },
      {
        code: 1,
        meaning:
          "no daemon watches the directory, or it did not take the request within 15 s; either way the request is kept, and the daemon that next runs there takes it (with the fresh budget)",
      },
    ],
    example: "shardctl reconcile llama",
  },
  {
    name: "nodes",
    purpose: "probe the registered nodes: OS, accelerator, engine version, memory, disk",
    usage: "shardctl nodes [--json] [--engine-binary <path>]",
    operands: { kind: "none" },
    flags: [
      jsonFlag,
      {
        name: "--engine-binary",
        value: "<path>",
        description: "report `<path> --version` on each node",
        default: "the node's declared engine_version, unprobed",
        complete: { kind: "file" },
      },
      ...contextFlags,
    ],
    exitCodes: [
      { code: 0, meaning: "every node answered" },
      { code: 1, meaning: "a node did not answer or its probe failed" },
    ],
    example: "shardctl nodes --json",
  },
  {
    name: "stage",
    purpose: "stage a cluster's model files onto its nodes without launching (download or push, verify)",
    usage: "shardctl stage <cluster> [--json]",
    details: [
      'Brings every node of the cluster to "present" as the daemon does before a launch: the files its stage needs (the coordinator\'s node: config and tokenizer), verified by sha256, in the Hugging Face cache layout under the node\'s model_dir. With source = "path" it only checks that every node has the model there.',
    ],
    operands: { kind: "cluster" },
    flags: [jsonFlag, ...contextFlags],
    exitCodes: [
      { code: 0, meaning: "every node has the files" },
      { code: 1, meaning: "a node could not be staged, the definition is invalid or the plan infeasible" },
    ],
    example: "shardctl stage llama",
  },
  {
    name: "service",
    purpose: "run the daemon as a service: a systemd unit (Linux) or a launchd job (macOS)",
    usage:
      "shardctl service install|uninstall|status [--user] [--dir clusters] [--config shardctl.toml] [--run-as <user>] [--dry-run] [--force] [--platform systemd|launchd] [--root <dir>]",
    details: [
      "install writes the unit (systemd) or plist (launchd) that runs `shardctl daemon` on the directory, restarts it on failure and logs where the platform keeps logs, then loads and starts it; rerun it to upgrade (the daemon restarts, the clusters keep running).",
      "uninstall stops and disables the service and removes its file (the clusters keep running; the environment file with the secrets stays). status says whether the file is installed and what the service manager says of it.",
    ],
    operands: { kind: "words", words: ["install", "uninstall", "status"] },
    flags: [
      { name: "--user", description: "the user's service manager (~/.config/systemd/user, ~/Library/LaunchAgents) instead of the system's" },
      ...contextFlags,
      {
        name: "--platform",
        value: "<systemd|launchd>",
        description: "the service manager to write for",
        default: "systemd on Linux, launchd on macOS",
        complete: { kind: "words", words: ["systemd", "launchd"] },
      },
      { name: "--run-as", value: "<user>", description: "system services: the user the daemon runs as", default: "$SUDO_USER, else you", complete: { kind: "none" } },
      { name: "--dry-run", description: "install, uninstall: print the files and the commands; write and run nothing" },
      { name: "--force", description: "replace or remove a file at the service's path that shardctl did not write" },
      { name: "--root", value: "<dir>", description: "write the files under <dir> and ask no service manager (for packaging and tests)", complete: { kind: "dir" } },
    ],
    exitCodes: [
      { code: 0, meaning: "done (status: installed and running)" },
      { code: 1, meaning: "an error, or refused" },
      { code: 2, meaning: "status: installed, not running" },
      {
        code: 3,
        meaning:
          "install, uninstall: the file was written (removed) but not loaded (unloaded), as no service manager runs here or with --root; status: installed, state unknown",
      },
      { code: 4, meaning: "status: not installed" },
    ],
    example: "sudo shardctl service install --config /srv/gitops/shardctl.toml",
  },
  {
    name: "router",
    purpose: "serve a continuum-router YAML config with the embedded OpenAI-compatible router",
    usage: "shardctl router --config <router.yaml> [--host H] [--port P] [--upstream-idle-seconds S] [--log-format json|pretty]",
    details: ["Reloads the config when the file changes. Stops on SIGINT or SIGTERM."],
    operands: { kind: "none" },
    flags: [
      { name: "--config", short: "-c", value: "<router.yaml>", description: "the continuum-router config to serve (required)", complete: { kind: "file" } },
      { name: "--host", value: "<address>", description: "listen address", default: "the config's server.bind_address, else 127.0.0.1", complete: { kind: "none" } },
      { name: "--port", short: "-p", value: "<port>", description: "listen port", default: "the config's server.bind_address, else 8080", complete: { kind: "none" } },
      {
        name: "--upstream-idle-seconds",
        value: "<seconds>",
        description: "longest a backend may send nothing while a request waits on it; then 504 upstream_timeout, or an error event mid-stream",
        default: "600",
        complete: { kind: "none" },
      },
      logFormatFlag,
    ],
    exitCodes: [
      { code: 0, meaning: "stopped by SIGINT or SIGTERM" },
      { code: 1, meaning: "could not start (config, address in use), or a usage error" },
    ],
    example: "shardctl router --config router.yaml --port 8088",
  },
  {
    name: "make-test-model",
    purpose: "write a deterministic Llama- or Qwen2-family MLX model with random weights, for tests and demos",
    usage:
      "shardctl make-test-model <dir> [--family llama|qwen2] [--layers N] [--hidden H] [--heads A] [--kv-heads K] [--intermediate I] [--vocab V] [--dtype f16|bf16|f32] [--quantize 4|8] [--shards S] [--seed X] [--tie] [--force]",
    operands: { kind: "dir" },
    flags: [
      {
        name: "--family",
        value: "<llama|qwen2>",
        description: "model architecture (qwen2 is one mlx-lm can pipeline)",
        default: "llama",
        complete: { kind: "words", words: ["llama", "qwen2"] },
      },
      { name: "--layers", value: "<N>", description: "transformer layers", default: "4", complete: { kind: "none" } },
      { name: "--hidden", value: "<H>", description: "hidden size", default: "64", complete: { kind: "none" } },
      { name: "--heads", value: "<A>", description: "attention heads", default: "4", complete: { kind: "none" } },
      { name: "--kv-heads", value: "<K>", description: "key/value heads", default: "2", complete: { kind: "none" } },
      { name: "--intermediate", value: "<I>", description: "MLP size", default: "2×hidden rounded up to 64", complete: { kind: "none" } },
      { name: "--vocab", value: "<V>", description: "vocabulary size", default: "320", complete: { kind: "none" } },
      { name: "--dtype", value: "<f16|bf16|f32>", description: "weight type", default: "f16", complete: { kind: "words", words: ["f16", "bf16", "f32"] } },
      {
        name: "--quantize",
        value: "<4|8>",
        description: "quantise the weights to 4 or 8 bits",
        default: "not quantised",
        complete: { kind: "words", words: ["4", "8"] },
      },
      { name: "--shards", value: "<S>", description: "safetensors files", default: "1", complete: { kind: "none" } },
      { name: "--seed", value: "<X>", description: "seed of the random weights", default: "0", complete: { kind: "none" } },
      { name: "--tie", description: "tie the output projection to the embeddings" },
      { name: "--force", description: "replace a model the directory already holds (its safetensors files are deleted)" },
    ],
    exitCodes: [
      { code: 0, meaning: "the model was written" },
      { code: 1, meaning: "an impossible shape, a directory that already holds a model (without --force), or a usage error" },
    ],
    example: "shardctl make-test-model .models/tiny --layers 8 --dtype bf16",
  },
  {
    name: "schemas",
    purpose: "print or regenerate schemas/*.schema.json (cluster, settings, status) from the zod schemas",
    usage: "shardctl schemas [--write] [--out schemas]",
    operands: { kind: "none" },
    flags: [
      { name: "--write", description: "write one file per schema instead of printing them" },
      { name: "--out", value: "<dir>", description: "where --write writes", default: "schemas", complete: { kind: "dir" } },
    ],
    exitCodes: [{ code: 0, meaning: "printed or written" }],
    example: "shardctl schemas --write",
  },
  {
    name: "completion",
    purpose: "print the shell completion script for bash or zsh",
    usage: "shardctl completion bash|zsh",
    details: [
      "Completes commands, flags, flag values and the cluster names of clusters/*.toml in the current directory (or --dir). Load it with `source <(shardctl completion bash)` in ~/.bashrc, or `source <(shardctl completion zsh)` in ~/.zshrc after compinit.",
    ],
    operands: { kind: "words", words: ["bash", "zsh"] },
    flags: [],
    exitCodes: [
      { code: 0, meaning: "the script was printed" },
      { code: 1, meaning: "an unknown shell" },
    ],
    example: "shardctl completion bash > ~/.local/share/bash-completion/completions/shardctl",
  },
  {
    name: "help",
    purpose: "list the commands, or show one command's flags, defaults, exit codes and an example",
    usage: "shardctl help [command]",
    operands: { kind: "command" },
    flags: [],
    exitCodes: [
      { code: 0, meaning: "the help was printed" },
      { code: 1, meaning: "no such command" },
    ],
    example: "shardctl help wait",
  },
] as const satisfies readonly CommandSpec[];

/** A row of the table, with its name as a literal type. */
export type CommandEntry = (typeof commandTable)[number];
export type CommandName = CommandEntry["name"];

export const commandNames: readonly CommandName[] = commandTable.map((command) => command.name);

/** The command called `name`, or undefined when there is none. */
export function findCommand(name: string): CommandEntry | undefined {
  return commandTable.find((command) => command.name === name);
}
