/**
 * A message too long for a status file is cut in its middle: what failed (its head) and why (its
 * tail) both stay, with how much went, and the result fits the cap's order.
 */
import { expect, test } from "vitest";
import { clipMessage, maxMessageChars } from "../../src/errors/index.js";

test("a path of thousands of characters before the cause: the cause stays", () => {
  const message = `node l1: cannot look at /tmp/${"d".repeat(8000)}/model.safetensors: File name too long`;
  const clipped = clipMessage(message);
  expect(clipped.startsWith("node l1: cannot look at /tmp/ddd")).toBe(true);
  expect(clipped.endsWith("/model.safetensors: File name too long")).toBe(true);
  expect(clipped).toContain(`… (${message.length - maxMessageChars} characters cut) …`);
  expect(clipped.length).toBeLessThan(maxMessageChars + 64);
});

test("a message within the cap is kept whole", () => {
  const message = "x".repeat(maxMessageChars);
  expect(clipMessage(message)).toBe(message);
});
