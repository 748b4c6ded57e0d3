/**
 * Whether the router answers at all. A registration is a line in a config file (or an admin API's
 * word): it stays in place while the router process is dead, hung or cut off, and every request
 * sent through the router fails. The watch asks the router's health URL every `intervalMs`; any
 * HTTP answer within the deadline counts (a router that answers 503 because no backend
 * is healthy yet still routes), a refused or reset connection or silence past the deadline does
 * not, and `strikes` such probes in a row make it "not answering". One answer makes it answering
 * again. The state starts as answering: nothing is claimed before a probe has found otherwise.
 */
import { request as httpRequest } from "node:http";
import { request as httpsRequest } from "node:https";
import { messageOf } from "../errors/index.js";

/** The router's state as last judged. `url`: the health URL asked; `since`: ISO time of the first failed probe of the silence. */
export type RouterAnswer = { answering: true; url: string } | { answering: false; url: string; problem: string; since: string };

export interface RouterAnswersOptions {
  /** The health URL to ask now, or undefined when there is nothing to ask (read at every probe: the settings may change). */
  target: () => Promise<string | undefined>;
  /** Between the end of one probe and the start of the next, ms. */
  intervalMs: number;
  /** Longest a probe waits for the answer's head, ms. */
  timeoutMs: number;
  /** Probes without an answer in a row before the router is judged not answering. */
  strikes: number;
  /** The judgement changed (not called for the first probes that find it answering). */
  onChange: (answer: RouterAnswer) => void;
}

export interface RouterAnswersWatch {
  /** The last judgement; undefined while there is no health URL to ask. */
  now(): RouterAnswer | undefined;
  stop(): void;
}

/** Start watching; the first probe runs at once. */
export function watchRouterAnswers(o: RouterAnswersOptions): RouterAnswersWatch {
  let current: RouterAnswer | undefined;
  let misses = 0;
  let firstMiss: string | undefined;
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  const judge = async (): Promise<void> => {
    const url = await o.target().catch(() => current?.url);
    // Nothing to ask, or another URL (the settings changed): judged afresh.
    if (url === undefined || (current !== undefined && current.url !== url)) {
      current = undefined;
      misses = 0;
      firstMiss = undefined;
    }
    if (url === undefined) return;
    const problem = await askRouter(url, o.timeoutMs);
    if (stopped) return;
    if (problem === undefined) {
      misses = 0;
      firstMiss = undefined;
      const was = current;
      current = { answering: true, url };
      if (was !== undefined && !was.answering) o.onChange(current);
      return;
    }
    misses += 1;
    firstMiss ??= new Date().toISOString();
    if (misses < o.strikes) return;
    const was = current;
    current = { answering: false, url, problem, since: firstMiss };
    // Said once per silence; its words follow the latest probe.
    if (was === undefined || was.answering) o.onChange(current);
  };
  const loop = (): void => {
    void judge().finally(() => {
      if (!stopped) timer = setTimeout(loop, o.intervalMs);
    });
  };
  loop();
  return {
    now: () => current,
    stop: () => {
      stopped = true;
      if (timer !== undefined) clearTimeout(timer);
    },
  };
}

/** One GET of `url`: undefined when any HTTP answer's head arrived within `timeoutMs`, else what went wrong, in words. */
export function askRouter(url: string, timeoutMs: number): Promise<string | undefined> {
  return new Promise((resolve) => {
    let settled = false;
    const settle = (problem: string | undefined): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      request.destroy();
      resolve(problem);
    };
    const send = url.startsWith("https:") ? httpsRequest : httpRequest;
    // A fresh connection each time (no agent): a kept-alive socket to a router since killed says nothing new.
    // Its certificate is not judged: the question is whether it answers, and nothing secret is sent
    // (a router behind a self-signed certificate would otherwise never be said to answer).
    const request = send(url, { method: "GET", agent: false, rejectUnauthorized: false, headers: { connection: "close" } }, (response) => {
      response.resume();
      settle(undefined);
    });
    // A deadline that fires late found this process busy, not the router silent (the embedded router
    // answers from this very process): the answer may wait unread, so it gets one more deadline.
    const startedAt = performance.now();
    const expire = (): void => {
      if (performance.now() - startedAt > timeoutMs * 1.2 && !extended) {
        extended = true;
        timer = setTimeout(expire, timeoutMs);
        return;
      }
      settle(`no answer within ${timeoutMs} ms (a router that hangs, or a network that drops its packets)`);
    };
    let extended = false;
    let timer = setTimeout(expire, timeoutMs);
    request.on("error", (error) => settle(messageOf(error)));
    request.end();
  });
}
