import type { EngineKind } from "./kinds.js";
import { selectKinds } from "./registry.js";
import type { EngineFacts } from "./types.js";

/** Whether an engine runs on a node of this accelerator family. */
export function canRunOn(engine: EngineFacts, accelerator: string): boolean {
  return engine.runsOn === undefined || engine.runsOn.accelerators.includes(accelerator);
}

/** The kinds that run on every one of these accelerator families: what to suggest instead. */
export function selectKindsRunningOn(accelerators: readonly string[]): EngineKind[] {
  return selectKinds((engine) => accelerators.every((accelerator) => canRunOn(engine, accelerator)));
}

/** `"reference"`, `"a" or "b"`: kinds as a definition would write them, for hints. */
export function quoteKinds(kinds: readonly EngineKind[]): string {
  return kinds.map((kind) => `"${kind}"`).join(" or ");
}
