/**
 * Request bodies to typed requests without holding the coordinator's event loop. A body of a few
 * MiB of tiny objects (`[{},{},…]`) takes about half a second to parse, and several times that in
 * the engine's small young generation; several arriving together would hold the loop for seconds:
 * /health unanswered (the daemon's monitor takes three silent probes for a death) and every other
 * client waiting. Bodies of at least `threadedBodyBytes` are parsed and validated on a thread of
 * their own, started at the first such body, and only the typed request comes back; smaller ones
 * in place, where a thread hop would cost more than they do.
 */
import { Worker } from "node:worker_threads";
import { builtFile } from "../built-file.js";
import { type ParseAnswer, type ParseJob, parseRequestBody, type RequestKind } from "./parse-request-body.js";
import { ApiError, type ChatRequest, type CompletionRequest } from "./requests.js";

/** Bytes from which a body is parsed on the thread: a few milliseconds of parsing at worst. */
export const threadedBodyBytes = 64 * 1024;

/** The parser thread itself failed (not the body): a server error, the next large body starts a new thread. */
export class ParserThreadFailed extends Error {
  override readonly name = "ParserThreadFailed";
}

export class RequestParser {
  private worker: Worker | undefined;
  private nextId = 1;
  private readonly waiting = new Map<number, { resolve: (request: ChatRequest | CompletionRequest) => void; reject: (error: Error) => void }>();

  /** `hold`: runs the in-place parse while the pipeline's peers keep hearing from this process. */
  constructor(private readonly hold: <T>(work: () => T) => T = (work) => work()) {}

  /** The typed request in `body`, or the ApiError the client is to get. */
  parse(body: Buffer, kind: RequestKind): Promise<ChatRequest | CompletionRequest> {
    if (body.length < threadedBodyBytes) {
      try {
        return Promise.resolve(this.hold(() => parseRequestBody(body, kind)));
      } catch (error) {
        return Promise.reject(error as Error);
      }
    }
    // A copy the thread owns: the body's own memory may be a slice of a pooled buffer.
    const owned = new Uint8Array(body).buffer;
    const worker = (this.worker ??= this.start());
    const job: ParseJob = { id: this.nextId++, kind, body: owned };
    return new Promise((resolve, reject) => {
      this.waiting.set(job.id, { resolve, reject });
      worker.postMessage(job, [owned]);
    });
  }

  /** Stop the thread, if it was started; bodies it was parsing fail. */
  async close(): Promise<void> {
    const worker = this.worker;
    this.worker = undefined;
    await worker?.terminate();
  }

  private start(): Worker {
    const worker = new Worker(workerPath(), { resourceLimits: { maxYoungGenerationSizeMb: 32, maxOldGenerationSizeMb: 512 } });
    // Never what keeps the process alive.
    worker.unref();
    worker.on("message", (answer: ParseAnswer) => {
      const waiter = this.waiting.get(answer.id);
      this.waiting.delete(answer.id);
      if ("request" in answer) waiter?.resolve(answer.request);
      // A failure that is not the client's (status 500) is a plain error, logged as one.
      else if (answer.error.status >= 500) waiter?.reject(new Error(`the request parser thread failed: ${answer.error.message}`));
      else waiter?.reject(new ApiError(answer.error.status, answer.error.message, answer.error.param, answer.error.code, answer.error.type));
    });
    const fail = (error: Error): void => {
      if (this.worker === worker) this.worker = undefined;
      for (const waiter of this.waiting.values()) waiter.reject(new ParserThreadFailed(error.message));
      this.waiting.clear();
    };
    worker.on("error", fail);
    worker.on("exit", (code) => fail(new Error(`the request parser thread exited (code ${code})`)));
    return worker;
  }
}

/**
 * request-parser-worker.js beside this module in the build. Run from source (vitest, tsx) there is
 * only the .ts file, which a worker cannot load, so the build's copy is used.
 */
function workerPath(): string {
  return builtFile(import.meta.url, "./request-parser-worker.js");
}
