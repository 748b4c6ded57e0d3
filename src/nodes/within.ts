import { setDeadline, type Deadline } from "./deadline.js";

/** `work`'s value, or `fallback` when it fails or takes longer than `ms`: for evidence worth a bounded wait, never a failure. */
export async function within<T, F>(ms: number, work: Promise<T>, fallback: F): Promise<T | F> {
  let deadline: Deadline | undefined;
  try {
    return await Promise.race([work.catch(() => fallback), new Promise<F>((resolve) => (deadline = setDeadline(ms, () => resolve(fallback))))]);
  } finally {
    deadline?.clear();
  }
}
