/**
 * The prompt encoder's thread (prompt-encoder.ts): the served model's tokenizer, answering one
 * request at a time with the prompt's token ids or the error that building it raised.
 */
import { parentPort, workerData } from "node:worker_threads";
import { TextCodec, type ChatMessage } from "./text.js";

export type EncodeRequest = { id: number; text: string } | { id: number; messages: ChatMessage[] };
export type EncodeAnswer = { id: number; ids: number[] } | { id: number; error: string };

const codec = new TextCodec((workerData as { modelDir: string }).modelDir);
parentPort?.on("message", (request: EncodeRequest) => {
  let answer: EncodeAnswer;
  try {
    answer = { id: request.id, ids: "text" in request ? codec.encode(request.text) : codec.encodeChat(request.messages) };
  } catch (error) {
    answer = { id: request.id, error: error instanceof Error ? error.message : String(error) };
  }
  parentPort?.postMessage(answer);
});
