/** Where a model is read from: a local directory, or a Hugging Face Hub-compatible endpoint. */
export type ModelSource =
  | { kind: "dir"; path: string }
  | {
      kind: "hub";
      /** e.g. "https://huggingface.co" or a mirror; no trailing slash needed. */
      endpoint: string;
      /** Repository id "org/name". */
      repo: string;
      /** Branch, tag or commit. */
      revision: string;
      /** Sent as `Authorization: Bearer <token>` when given. */
      token?: string;
      /** Deadline of each HTTP request (ms). Default 30000. */
      timeoutMs?: number;
      /**
       * The revision's file paths when the caller already listed them (a branch pinned to its commit
       * lists every file): the tokenizer is then looked for among them. Without it nothing is listed
       * at planning, which reads only config.json and the safetensors headers.
       */
      files?: readonly string[];
    };

/** A safetensors header as read from a source, before parsing. */
export interface RawHeader {
  /** The N JSON header bytes. */
  bytes: Uint8Array;
  /** Size of the whole file (bytes); undefined when the source did not say (a server that ignores Range and sends no length). */
  fileSize: number | undefined;
}

/** What inspection needs from a source; every path is relative to the model root. */
export interface SourceReader {
  /** For messages: "/models/llama" or "hub:org/name@main". */
  describe(): string;
  /**
   * Parsed JSON of a small file, or undefined when the file does not exist. A file larger than
   * `maxBytes` (bytes) is refused with `FileTooLarge` before it is read whole; a local one that is
   * not a regular file (a FIFO, a directory) with `NotRegularFile`.
   */
  readJson(path: string, maxBytes: number): Promise<unknown>;
  /**
   * The header of a safetensors file (never its data), or undefined when it does not exist.
   * `reserve` is called with the header's length N (bytes) once the file's first 8 bytes are read
   * and before the N bytes are: it throws to refuse the header unread (a model's headers past their cap).
   */
  readHeader(path: string, reserve?: (headerBytes: number) => void): Promise<RawHeader | undefined>;
  /** Every file path of the model (to explain a missing model, and to find its tokenizer), undefined if unknown. */
  listFiles(): Promise<string[] | undefined>;
  /** Whether listing costs no request of its own (a local directory, or a Hub revision whose files the caller listed). */
  listsCheaply?: boolean;
}
