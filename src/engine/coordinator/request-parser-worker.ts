/**
 * The request parser's thread (request-parser.ts): parses and validates one large request body at a
 * time and answers with the typed request, or with the error the client is to get. Only the request
 * travels back; whatever else the body held (a client's megabytes of tiny objects) stays here.
 */
import { parentPort } from "node:worker_threads";
import { type ParseJob, type ParseAnswer, parseRequestBody } from "./parse-request-body.js";

parentPort?.on("message", (job: ParseJob) => {
  let answer: ParseAnswer;
  try {
    answer = { id: job.id, request: parseRequestBody(Buffer.from(job.body), job.kind) };
  } catch (error) {
    answer = { id: job.id, error: errorFields(error) };
  }
  parentPort?.postMessage(answer);
});

function errorFields(error: unknown): NonNullable<Extract<ParseAnswer, { error: unknown }>["error"]> {
  const e = error as { status?: number; message?: string; param?: string | null; code?: string | null; type?: string };
  return { status: e.status ?? 500, message: e.message ?? String(error), param: e.param ?? null, code: e.code ?? null, type: e.type ?? "server_error" };
}
