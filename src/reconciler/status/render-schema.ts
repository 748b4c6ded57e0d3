import { z } from "zod";
import { statusSchema } from "./schema.js";

/** schemas/status.schema.json: the output side of the status schema (what the daemon writes). */
export function renderStatusSchema(): string {
  const json = z.toJSONSchema(statusSchema, { io: "output", target: "draft-2020-12", unrepresentable: "throw" });
  return `${JSON.stringify(json, null, 2)}\n`;
}
