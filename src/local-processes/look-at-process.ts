/**
 * What this machine says of a pid, for the files that name their writer by it (a daemon's lock, a
 * node lock, a draft of a whole-file write): whether a process has it and runs, and when it started.
 *
 * A pid that kill(pid, 0) reaches may still run nothing: a zombie (killed, not yet reaped by a
 * parent that waits late or never, or held by a tracer) keeps its pid and its start time. Where
 * /proc exists (Linux), one read of /proc/<pid>/stat gives both its state and its start time.
 */
import { readFile } from "node:fs/promises";

export interface ProcessSighting {
  /** A process has the pid and is not a zombie. */
  runs: boolean;
  /** Its start time in clock ticks after boot (/proc/<pid>/stat field 22); empty where the system does not tell. */
  startTime: string;
}

/** Look at `pid` on this machine. A pid this user may not signal (EPERM) still runs. */
export async function lookAtProcess(pid: number): Promise<ProcessSighting> {
  if (!Number.isInteger(pid) || pid <= 0) return { runs: false, startTime: "" };
  try {
    process.kill(pid, 0);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EPERM") return { runs: false, startTime: "" };
  }
  const stat = await readFile(`/proc/${pid}/stat`, "utf8").catch(() => "");
  if (stat === "") return { runs: true, startTime: "" };
  // Fields after the command's closing parenthesis: 3 (the state) is first, 22 (the start time) is the 20th.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  const state = fields[0] ?? "";
  return { runs: state !== "Z" && state !== "X", startTime: fields[19] ?? "" };
}
