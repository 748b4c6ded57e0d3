/**
 * A deadline that a frozen process does not expire unfairly. A daemon stopped (SIGSTOP, a debugger,
 * a VM paused) for longer than a question's deadline resumes with that deadline's timer due at once,
 * and the event loop runs due timers before the round trips the question still needs (an SSH
 * channel's opening, the command, its output): the question was given up and the node blamed for a
 * silence that was the daemon's own ("start timed out after 75065 ms" of a node that answered in
 * milliseconds). A deadline that fires more than `lateMs` after it was due waits `graceMs` more,
 * once, for those round trips; one that fires on time expires at once.
 */

/** How late a deadline's timer may fire before the process is taken to have been frozen, ms. */
const lateMs = 2_000;
/** How long a deadline that fired late waits for what arrived meanwhile, ms. */
const graceMs = 1_000;

export interface Deadline {
  clear(): void;
}

/** Call `expire` once `ms` have passed (see the module's comment), unless cleared first. */
export function setDeadline(ms: number, expire: () => void): Deadline {
  const due = performance.now() + ms;
  let timer = setTimeout(() => {
    if (performance.now() - due <= lateMs) return expire();
    timer = setTimeout(expire, graceMs);
  }, ms);
  return { clear: () => clearTimeout(timer) };
}
