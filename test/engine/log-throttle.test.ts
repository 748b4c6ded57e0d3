/**
 * Refusals a peer can cause at will are logged once per window and kind. A peer that varies what it
 * sends (a role of its choosing, kilobytes long, in each hello) is still one kind, and its words are
 * logged cut short: 65 distinct 4 KB roles a window once logged every one of them.
 */
import { expect, it } from "vitest";
import { LogThrottle, maxShownChars, shownMessage } from "../../src/engine/log-throttle.js";

it("messages that differ only in a peer's quoted words or numbers are one kind; the others are kinds of their own", () => {
  const throttle = new LogThrottle(10_000, 64);
  const roles = Array.from({ length: 100 }, (_, i) => `unknown peer role ${JSON.stringify(`r${i}${"Z".repeat(3900)}`)}`);
  const logged = roles.filter((message) => throttle.take(message, 0).log);
  expect(logged).toHaveLength(1);
  expect(throttle.take("handshake timed out after 10000 ms", 0).log).toBe(true);
  expect(throttle.take("handshake timed out after 9999 ms", 1).log).toBe(false);
  // The next window says how many were held back.
  expect(throttle.take(roles[5]!, 10_000)).toEqual({ log: true, suppressed: 99 });
});

it("a logged message is cut to its first characters, saying how long it was", () => {
  const long = `unknown peer role "${"Z".repeat(4000)}"`;
  expect(shownMessage(long)).toHaveLength(maxShownChars + ` (${long.length} characters)`.length + 1);
  expect(shownMessage(long)).toMatch(/… \(4020 characters\)$/);
  expect(shownMessage("short")).toBe("short");
});
