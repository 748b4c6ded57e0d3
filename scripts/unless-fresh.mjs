// Runs a build step unless its output is newer than every one of its inputs, so that `npm start`
// and `npm test`, which build first, do not redo steps nothing changed for. Usage:
//   node scripts/unless-fresh.mjs <output> <input file or directory>… -- <command> <argument>…
// Inputs are walked whole (directories recursively, node_modules skipped); a missing output, or a
// missing input, runs the step. Exits with the step's status.
import { spawnSync } from "node:child_process";
import { readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import process from "node:process";

const args = process.argv.slice(2);
const split = args.indexOf("--");
if (split < 2 || split === args.length - 1) {
  process.stderr.write("usage: node scripts/unless-fresh.mjs <output> <input>… -- <command> <argument>…\n");
  process.exit(2);
}
const [output, ...inputs] = args.slice(0, split);
const [command, ...commandArgs] = args.slice(split + 1);

/** The newest modification time (ms) under `path`, or Infinity when it cannot be read. */
function newestUnder(path) {
  let info;
  try {
    info = statSync(path);
  } catch {
    return Infinity;
  }
  if (!info.isDirectory()) return info.mtimeMs;
  let newest = info.mtimeMs;
  for (const entry of readdirSync(path)) {
    if (entry === "node_modules") continue;
    newest = Math.max(newest, newestUnder(join(path, entry)));
  }
  return newest;
}

function outputTime() {
  try {
    return statSync(output).mtimeMs;
  } catch {
    return -Infinity;
  }
}

if (outputTime() >= Math.max(...inputs.map(newestUnder))) {
  process.stdout.write(`${output} is newer than ${inputs.join(", ")}: not rebuilt\n`);
  process.exit(0);
}
const step = spawnSync(command, commandArgs, { stdio: "inherit" });
if (step.error !== undefined) {
  process.stderr.write(`${command}: ${step.error.message}\n`);
  process.exit(1);
}
process.exit(step.status ?? 1);
