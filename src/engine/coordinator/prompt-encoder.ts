/**
 * Prompts to token ids without holding the coordinator's event loop. Tokenizing costs about 1 µs
 * per character here, so a prompt of a few megabytes tokenized in place would hold the loop for
 * seconds: /health unanswered (the daemon's monitor takes three silent probes for a death) and
 * the stage links silent past their liveness bound (2.5 s), which breaks the pipeline for every
 * request. Prompts of at least `threadedChars` characters (a chat's counted with its roles and the
 * template's markers, so that many short messages count too) are tokenized on a thread of their own,
 * started at the first such prompt and loading its own copy of the tokenizer; shorter ones in
 * place, where a thread hop would cost more than they do.
 */
import { Worker } from "node:worker_threads";
import { builtFile } from "../built-file.js";
import type { ChatMessage, TextCodec } from "./text.js";
import type { EncodeAnswer, EncodeRequest } from "./tokenizer-worker.js";

/** Characters from which a prompt is tokenized on the thread: about 20 ms of tokenizing. */
const threadedChars = 20_000;

/** Characters a chat template adds around each message (its role's markers), about: many empty messages are a long prompt too. */
const templateCharsPerMessage = 32;

/** About how long the chat template's text over `messages` is, characters: what rendering and tokenizing it cost. */
function renderedChars(messages: ChatMessage[]): number {
  return messages.reduce((sum, m) => sum + m.role.length + m.content.length + templateCharsPerMessage, 0);
}

/**
 * How long the thread may take for a prompt before it is taken for stuck, ms: 5 s, plus 20 µs a
 * character of the prompts waiting on it, itself included (20 × what tokenizing costs). A thread
 * that hangs (a tokenizer that never returns, a stopped thread) would otherwise hold every long
 * prompt for ever while /health says 200.
 */
function stuckAfterMs(chars: number): number {
  return 5_000 + chars * 0.02;
}

/** The tokenizer thread itself failed (not the prompt): a server error, the next long prompt starts a new thread. */
export class TokenizerThreadFailed extends Error {
  override readonly name = "TokenizerThreadFailed";
}

export class PromptEncoder {
  private worker: Worker | undefined;
  private nextId = 1;
  private readonly waiting = new Map<number, { resolve: (ids: number[]) => void; reject: (error: Error) => void; chars: number; timer: NodeJS.Timeout }>();

  constructor(
    private readonly codec: TextCodec,
    private readonly modelDir: string,
    /**
     * Runs the work done in place while the pipeline's peers keep hearing from this process: a
     * short chat still runs the model's chat template, which may loop for as long as it likes.
     */
    private readonly hold: <T>(work: () => T) => T = (work) => work(),
  ) {}

  /** Token ids of a completion prompt (no special tokens added). */
  encode(text: string): Promise<number[]> {
    if (text.length < threadedChars) return Promise.resolve(this.hold(() => this.codec.encode(text)));
    return this.ask({ id: this.nextId++, text }, text.length);
  }

  /** Token ids of the chat template rendered over `messages` with the generation prompt. */
  encodeChat(messages: ChatMessage[]): Promise<number[]> {
    const chars = renderedChars(messages);
    if (chars < threadedChars) return Promise.resolve(this.hold(() => this.codec.encodeChat(messages)));
    return this.ask({ id: this.nextId++, messages }, chars);
  }

  /** Stop the thread, if it was started; prompts it was tokenizing fail. */
  async close(): Promise<void> {
    const worker = this.worker;
    this.worker = undefined;
    this.failAll(new Error("the coordinator is stopping"));
    await worker?.terminate();
  }

  private ask(request: EncodeRequest, chars: number): Promise<number[]> {
    const worker = (this.worker ??= this.start());
    const ahead = [...this.waiting.values()].reduce((sum, w) => sum + w.chars, 0);
    const limitMs = stuckAfterMs(ahead + chars);
    return new Promise((resolve, reject) => {
      // Still waiting at its deadline: the thread is stuck; ended, it fails every prompt it holds.
      const timer = setTimeout(() => {
        if (!this.waiting.has(request.id) || this.worker !== worker) return;
        this.worker = undefined;
        this.failAll(new Error(`the tokenizer thread did not answer within ${Math.round(limitMs)} ms: it is stopped, and the next long prompt starts another`));
        void worker.terminate();
      }, limitMs);
      timer.unref();
      this.waiting.set(request.id, { resolve, reject, chars, timer });
      worker.postMessage(request);
    });
  }

  /** Fail every prompt waiting on the thread. */
  private failAll(error: Error): void {
    for (const waiter of this.waiting.values()) {
      clearTimeout(waiter.timer);
      waiter.reject(new TokenizerThreadFailed(error.message));
    }
    this.waiting.clear();
  }

  private start(): Worker {
    const worker = new Worker(workerPath(), { workerData: { modelDir: this.modelDir } });
    // Never what keeps the process alive.
    worker.unref();
    worker.on("message", (answer: EncodeAnswer) => {
      const waiter = this.waiting.get(answer.id);
      this.waiting.delete(answer.id);
      clearTimeout(waiter?.timer);
      if ("ids" in answer) waiter?.resolve(answer.ids);
      else waiter?.reject(new Error(answer.error));
    });
    const fail = (error: Error): void => {
      // A thread already given up on (stuck) has failed its prompts; newer ones wait on its successor.
      if (this.worker !== worker) return;
      this.worker = undefined;
      this.failAll(error);
    };
    worker.on("error", fail);
    worker.on("exit", (code) => fail(new Error(`the tokenizer thread exited (code ${code})`)));
    return worker;
  }
}

/**
 * tokenizer-worker.js beside this module in the build. Run from source (vitest, tsx) there is only
 * the .ts file, which a worker cannot load, so the build's copy is used.
 */
function workerPath(): string {
  return builtFile(import.meta.url, "./tokenizer-worker.js");
}
