/**
 * Asking a port from a node without mistaking a lost packet for a partition: a connection attempt
 * whose SYN or SYN-ACK is lost is retransmitted by the kernel only after 1 s, so a probe with a 1 s
 * deadline would read a 2 % lossy link as "no answer" a few times a minute. Attempts are therefore
 * staggered (one every `staggerMs`, 250 ms by default) within the deadline, and the first definite
 * answer wins: "open" or "refused" from any attempt, "no-answer" only when none got one in time.
 */
import type { PortAnswer } from "./types.js";

/** One connection attempt: resolves "open", "refused" or "no-answer"; `cancel` abandons it. */
export type PortAttempt = () => { answer: Promise<PortAnswer>; cancel: () => void };

/** Time between staggered attempts, ms. */
export const defaultStaggerMs = 250;

export function askPort(attempt: PortAttempt, deadlineMs: number, staggerMs = defaultStaggerMs): Promise<PortAnswer> {
  return new Promise((resolve) => {
    const started: Array<() => void> = [];
    let settled = false;
    let stagger: NodeJS.Timeout | undefined;
    const finish = (answer: PortAnswer): void => {
      if (settled) return;
      settled = true;
      clearTimeout(deadline);
      clearTimeout(stagger);
      for (const cancel of started) cancel();
      resolve(answer);
    };
    const deadline = setTimeout(() => finish("no-answer"), deadlineMs);
    const launch = (): void => {
      if (settled) return;
      const { answer, cancel } = attempt();
      started.push(cancel);
      // One attempt's "no-answer" (host unreachable) is not final: a later attempt may still get through.
      void answer.then((a) => (a === "no-answer" ? undefined : finish(a)));
      stagger = setTimeout(() => {
        stagger = undefined;
        launch();
      }, staggerMs);
    };
    launch();
  });
}
