/**
 * Text someone else wrote (a model's config.json or tensor names, a message quoting them) in
 * Markdown meant to be posted, such as a pull-request comment: it must read as text, never act as
 * Markdown or HTML. A line break would end the line and start a heading or a list of its own, and
 * `[x](url)` or `<img>` would render, so the text goes in a code span (where neither Markdown nor
 * HTML takes effect, and GitHub links nothing) with every control character and line separator
 * shown escaped, as the terminal output shows them.
 */
import { showText } from "../errors/index.js";

/**
 * `text` as an inline code span. Its fence is one backtick longer than the longest run of backticks
 * in it, so none of them closes the span; content that starts or ends with a backtick or a space
 * (and is not all spaces) is padded with one space each side, which the renderer strips again.
 */
export function codeSpan(text: string): string {
  const shown = showText(text);
  if (shown === "") return "` `";
  const longest = Math.max(0, ...(shown.match(/`+/g) ?? []).map((run) => run.length));
  const fence = "`".repeat(longest + 1);
  // Only spaces are shown as they are: the renderer strips nothing from them.
  const pad = /[^ ]/.test(shown) && /^[ `]|[ `]$/.test(shown) ? " " : "";
  return `${fence}${pad}${shown}${pad}${fence}`;
}
