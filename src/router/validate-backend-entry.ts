/** Refuses a backend entry the router could not use, before anything is written. */
import { ShardctlError } from "../errors/index.js";
import type { BackendEntry } from "./types.js";

export function validateBackendEntry(entry: BackendEntry): BackendEntry {
  const fail = (message: string): never => {
    throw new ShardctlError("RouterRegistrationFailed", `backend "${entry.name}": ${message}`, { terminal: true });
  };
  if (typeof entry.name !== "string" || entry.name.length === 0) fail("expected a non-empty `name`");
  let url: URL | undefined;
  try {
    url = new URL(entry.url);
  } catch {
    fail(`expected \`url\` to be an http(s) URL, got "${entry.url}"`);
  }
  if (url !== undefined && url.protocol !== "http:" && url.protocol !== "https:") fail(`expected \`url\` to be an http(s) URL, got "${entry.url}"`);
  if (!Array.isArray(entry.models) || entry.models.some((model) => typeof model !== "string" || model.length === 0)) {
    fail("expected `models` to be a list of non-empty strings");
  }
  if (entry.weight !== undefined && !(Number.isFinite(entry.weight) && entry.weight > 0)) {
    fail(`expected \`weight\` to be a positive number, got ${entry.weight}`);
  }
  if (entry.upstream_model !== undefined && (typeof entry.upstream_model !== "string" || entry.upstream_model.length === 0)) {
    fail("expected `upstream_model` to be a non-empty string");
  }
  const result: BackendEntry = { name: entry.name, url: entry.url, models: [...entry.models] };
  if (entry.weight !== undefined) result.weight = entry.weight;
  if (entry.upstream_model !== undefined) result.upstream_model = entry.upstream_model;
  return result;
}
