/**
 * Whether a thread pool's sharing of jobs with its workers pays. Every `judgedJobs` shared jobs it
 * adds up the time they saved the caller (the chunks the workers computed, at the caller's own pace
 * per chunk, less the time the caller waited for workers after its own chunks); a window that saved
 * no time pauses sharing: the next jobs stay on the caller for minPauseMs, doubling with each such
 * window in a row up to maxPauseMs, and one window that saved time ends the doubling. So a machine
 * that cannot give the pool its cores gets one thread computing each chunk once rather than two
 * computing some twice, while a worker now and then late (waking up, or slower on a core it shares
 * with another hardware thread) costs one chunk twice and no pause.
 */

/** Shared jobs per judgement. */
export const judgedJobs = 16;
/** The first pause after a window that saved nothing, ms; it doubles with each such window in a row. */
export const minPauseMs = 50;
/** The longest pause, ms. */
export const maxPauseMs = 2000;

export class SharingJudge {
  /** Jobs stay on the caller until this time (performance.now() ms). */
  private pausedUntil = 0;
  /** The last pause's length, ms (0 after a window that saved time). */
  private pauseMs = 0;
  private jobs = 0;
  private savedMs = 0;
  /** Windows that paused sharing, since start. */
  pauses = 0;

  /** Whether jobs should stay on the caller at `now` (ms). */
  paused(now: number): boolean {
    return now < this.pausedUntil;
  }

  /** Count one shared job's saving (ms; negative: sharing cost the caller time) at `now` (ms). */
  record(savedMs: number, now: number): void {
    this.jobs++;
    this.savedMs += savedMs;
    if (this.jobs < judgedJobs) return;
    if (this.savedMs <= 0) {
      this.pauseMs = Math.min(maxPauseMs, Math.max(minPauseMs, this.pauseMs * 2));
      this.pausedUntil = now + this.pauseMs;
      this.pauses++;
    } else this.pauseMs = 0;
    this.jobs = 0;
    this.savedMs = 0;
  }
}
