/**
 * The command table and what is rendered from it, through the built CLI: `--version`, `help`,
 * `help <command>` and `<command> --help`, unknown commands, README.md's command table, and the
 * table's agreement with the command modules (each has one, and each accepts every flag listed).
 */
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { beforeAll, describe, expect, it } from "vitest";
import { commandTable as literalTable, type CommandSpec, type FlagSpec } from "../../src/cli/help/index.js";
import { repoRoot, requireBuild, shardctl } from "./support/run-shardctl.js";

// The rows as the renderers see them (the table's own type keeps every literal).
const commandTable: readonly CommandSpec[] = literalTable;
const commit = (await promisify(execFile)("git", ["rev-parse", "HEAD"], { cwd: repoRoot })).stdout.trim();
const packageVersion = (JSON.parse(await readFile(join(repoRoot, "package.json"), "utf8")) as { version: string }).version;

beforeAll(() => requireBuild());

describe("shardctl --version", () => {
  it("prints the package's version, long and short", async () => {
    for (const flag of ["--version", "-V"]) {
      // This checkout's commit beside the version: two builds of one version are told apart.
      expect(await shardctl([flag])).toEqual({ code: 0, stdout: `shardctl ${packageVersion} (commit ${commit.slice(0, 12)})\n`, stderr: "" });
    }
  });
});

describe("shardctl help", () => {
  it("lists every command of the table with its purpose; --help is the same page and a bare shardctl exits 1 with it", async () => {
    const help = await shardctl(["help"]);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain(`shardctl ${packageVersion}`);
    for (const command of commandTable) expect(help.stdout).toMatch(new RegExp(`^  ${command.name} +${escape(command.purpose)}$`, "m"));
    expect(await shardctl(["--help"])).toEqual(help);
    expect(await shardctl(["-h"])).toEqual(help);
    expect(await shardctl([])).toEqual({ ...help, code: 1 });
  });

  it("shows each command's usage, every flag with its default, its exit codes and an example; `<command> --help` is the same page", async () => {
    for (const command of commandTable) {
      const page = await shardctl(["help", command.name]);
      expect(page, command.name).toMatchObject({ code: 0, stderr: "" });
      const lines = page.stdout.split("\n");
      expect(lines[0]).toBe(`shardctl ${command.name}: ${command.purpose}`);
      expect(lines).toContain(`usage: ${command.usage}`);
      // A flag's or an exit code's line may wrap, indented under its first: joined again here.
      const text = page.stdout.replace(/\n {5,}(?=\S)/g, " ");
      for (const flag of command.flags) {
        expect(text, `${command.name} ${flag.name}`).toMatch(new RegExp(`^  ${escape(flagLabel(flag))} +${escape(flag.description)}`, "m"));
        if (flag.default !== undefined) expect(text, `${command.name} ${flag.name}`).toContain(`(default: ${flag.default})`);
      }
      for (const exit of command.exitCodes) expect(text, `${command.name} exit ${exit.code}`).toContain(`\n  ${exit.code}  ${exit.meaning}\n`);
      expect(lines.slice(-3)).toEqual(["example:", `  ${command.example}`, ""]);
      expect(command.example, command.name).toMatch(new RegExp(`(^|\\s)shardctl ${command.name}( |$)`));
      expect(command.usage.startsWith(`shardctl ${command.name}`), command.usage).toBe(true);

      expect(await shardctl([command.name, "--help"]), `${command.name} --help`).toEqual(page);
    }
  });

  it("answers --help anywhere on the line without running the command", async () => {
    // `daemon` would start and never return: the help must come from the table, before the command runs.
    const page = await shardctl(["help", "daemon"]);
    expect(await shardctl(["daemon", "--dir", "/nonexistent", "-h"])).toEqual(page);
  });

  it("refuses an unknown command, naming the commands", async () => {
    const names = commandTable.map((command) => command.name).join(", ");
    const help = await shardctl(["help", "deploy"]);
    expect(help).toEqual({ code: 1, stdout: "", stderr: `shardctl: help: no command "deploy"; the commands are ${names}\n` });
    const run = await shardctl(["deploy"]);
    expect(run.code).toBe(1);
    expect(run.stdout).toBe("");
    expect(run.stderr).toContain(`unknown command "deploy"; the commands are ${names}`);
    // A near miss gets a guess; "deploy" above is near nothing and gets none.
    const typo = await shardctl(["stauts"]);
    expect(typo.code).toBe(1);
    expect(typo.stderr).toContain(`unknown command "stauts" (did you mean "status"?); the commands are ${names}`);
    // An unknown option near one of the command's gets a guess too.
    const flag = await shardctl(["status", "--confg", "x"]);
    expect(flag.code).toBe(1);
    expect(flag.stderr).toContain("status: Unknown option '--confg' (did you mean --config?); run `shardctl status --help`");
    // An option where the command goes (`shardctl -v`): said to be one, with the two shardctl takes.
    const option = await shardctl(["-v"]);
    expect(option.code).toBe(1);
    expect(option.stderr).toContain('unknown option "-v" before a command; shardctl itself takes --version (-V) and --help (-h)');
  });

  it("ends a usage error with the command's usage line from the table", async () => {
    const run = await shardctl(["plan"]);
    expect(run).toEqual({ code: 1, stdout: "", stderr: `shardctl: expected at least one cluster\nusage: ${commandTable.find((c) => c.name === "plan")!.usage}\n` });
  });
});

describe("the command table and the command modules", () => {
  it("has a module exporting run() for every command", async () => {
    for (const command of commandTable) {
      const file = join(repoRoot, "dist/src/cli/commands", `${command.name}.js`);
      expect(existsSync(file), `${command.name}: ${file}`).toBe(true);
      const module = (await import(file)) as { run?: unknown };
      expect(typeof module.run, command.name).toBe("function");
    }
  });

  it("lists only flags the command accepts", async () => {
    // parseArgs reports the first option it does not know: after every flag of the table, that must
    // be the bogus one at the end, and the command stops there, before it does anything. Each run
    // loads its command's modules (about a second under load): four run at a time.
    await eachAtMost(
      4,
      commandTable.filter((command) => command.flags.length > 0),
      async (command) => {
        const args = command.flags.flatMap((flag) => [
          ...(flag.value === undefined ? [flag.name] : [flag.name, "x"]),
          ...(flag.short === undefined ? [] : flag.value === undefined ? [flag.short] : [flag.short, "x"]),
        ]);
        const run = await shardctl([command.name, ...args, "--not-a-flag"]);
        expect(run.code, `${command.name} ${args.join(" ")}`).toBe(1);
        expect(run.stderr, `${command.name} ${args.join(" ")}`).toContain(`${command.name}: Unknown option '--not-a-flag'`);
      },
    );
  });
});

describe("README.md's command table", () => {
  it("lists every command of the table, with the table's usage", async () => {
    const readme = await readFile(join(repoRoot, "README.md"), "utf8");
    const section = readme.slice(readme.indexOf("\n## Commands\n"));
    const rows = section
      .slice(section.indexOf("| command | what it does |"))
      .split("\n")
      .slice(2)
      .filter((line, i, lines) => line.startsWith("|") && lines.slice(0, i).every((l) => l.startsWith("|")));
    // The first cell of a row: `usage`, with Markdown's \| for a literal bar.
    const usages = rows.map((row) => /^\| `((?:[^`])+)` \|/.exec(row)?.[1]?.replaceAll("\\|", "|"));
    expect(usages.every((usage) => usage !== undefined)).toBe(true);
    const shardctlRows = usages.filter((usage) => usage!.startsWith("shardctl "));
    expect(new Set(shardctlRows.map((usage) => usage!.split(" ")[1]))).toEqual(new Set(commandTable.map((command) => command.name)));
    for (const command of commandTable) expect(shardctlRows, command.name).toContain(command.usage);
    // The one row that is not a shardctl command is the engine's.
    expect(usages.filter((usage) => !usage!.startsWith("shardctl ")).map((usage) => usage!.split(" ")[0])).toEqual(["shard-engine"]);
  });
});

function flagLabel(flag: FlagSpec): string {
  const names = flag.short === undefined ? flag.name : `${flag.short}, ${flag.name}`;
  return flag.value === undefined ? names : `${names} ${flag.value}`;
}

function escape(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/** `body` for every item, at most `limit` at once; rejects with the first failure once all have settled. */
async function eachAtMost<T>(limit: number, items: readonly T[], body: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const failures: unknown[] = [];
  const lane = async (): Promise<void> => {
    while (next < items.length) {
      const item = items[next++] as T;
      await body(item).catch((error: unknown) => failures.push(error));
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, lane));
  if (failures.length > 0) throw failures[0];
}
