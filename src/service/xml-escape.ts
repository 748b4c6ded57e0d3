import { checkServiceValue } from "./check-value.js";

/** Text for an XML element of a plist: `&`, `<` and `>` as entities, control characters refused. */
export function escapeXml(what: string, value: string): string {
  return checkServiceValue(what, value).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}
