/** Coordinator: HTTP/OpenAI surface, generation loop, local and remote pipelines. */
export { createHttpServer, maxBodyBytes, type HttpContext, type HealthState } from "./http-server.js";
export { LocalPipeline, type Pipeline } from "./pipeline.js";
export { RemotePipeline, PipelineBroken, type LinkState, type StageAddress } from "./remote-pipeline.js";
export { TextCodec, type ChatMessage } from "./text.js";
export { IncrementalText } from "./incremental-text.js";
export { CompletionText, type CompletionTextState } from "./completion-text.js";
export { generate, findStop, sendableLength, type GenerateOptions, type GenerateResult } from "./generate.js";
