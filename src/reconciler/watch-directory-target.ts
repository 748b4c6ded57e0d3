/**
 * Where a definitions directory given through a symbolic link leads. A deployment that swaps a
 * `current` link to a new release moves the directory under a running daemon: its lock, its file
 * watch and its status files stay with the old target while every command looks at the new one.
 * The daemon is told, and starts again on the new target (see the daemon command).
 */
import { realpath } from "node:fs/promises";

/** Look where `dir` leads every `everyMs` ms; `onMoved` once when it leads elsewhere than `startedAt`. Returns the stop. */
export function watchDirectoryTarget(dir: string, startedAt: string, everyMs: number, onMoved: (now: string) => void): () => void {
  let told = false;
  const timer = setInterval(() => {
    void realpath(dir).then(
      (now) => {
        if (told || now === startedAt) return;
        told = true;
        clearInterval(timer);
        onMoved(now);
      },
      // Missing for a moment (a link being replaced, a checkout recreating it): looked at again.
      () => undefined,
    );
  }, everyMs);
  timer.unref();
  return () => clearInterval(timer);
}
