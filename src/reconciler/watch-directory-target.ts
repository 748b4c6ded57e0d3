/**
 * Where a definitions directory given through a symbolic link leads. A deployment that swaps a
 * `current` link to a new release moves the directory under a running daemon: its lock, its file
 * watch and its status files stay with the old target while every command looks at the new one.
 * The daemon is told, and starts again on the new target (see the daemon command).
 */
import { realpathSync } from "node:fs";
import { realpath } from "node:fs/promises";

export interface DirectoryTargetWatch {
  /**
   * Look now (a file event came): true when `dir` leads elsewhere, `onMoved` then told. The swap's
   * own file events arrive before the periodic look: acted on, they started work through the new
   * target that the daemon's restart then cut off.
   */
  movedNow(): boolean;
  stop(): void;
}

/** Look where `dir` leads every `everyMs` ms, and when asked; `onMoved` once when it leads elsewhere than `startedAt`. */
export function watchDirectoryTarget(dir: string, startedAt: string, everyMs: number, onMoved: (now: string) => void): DirectoryTargetWatch {
  let told = false;
  const judge = (now: string): boolean => {
    if (told) return true;
    if (now === startedAt) return false;
    told = true;
    clearInterval(timer);
    onMoved(now);
    return true;
  };
  const timer = setInterval(() => {
    void realpath(dir).then(
      (now) => judge(now),
      // Missing for a moment (a link being replaced, a checkout recreating it): looked at again.
      () => undefined,
    );
  }, everyMs);
  timer.unref();
  return {
    movedNow() {
      try {
        return judge(realpathSync(dir));
      } catch {
        return told;
      }
    },
    stop: () => clearInterval(timer),
  };
}
