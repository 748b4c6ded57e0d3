// The SSH handshake's deadline grows with the round trip its TCP connection took: a LAN keeps the
// base (4 s), a path of 400 ms each way (a handshake of about 9 round trips, 7.4 s) gets 12 s.
import { expect, it } from "vitest";
import { handshakeDeadlineMs, sshKeepalive } from "../../src/nodes/index.js";

it("keeps the base on a LAN and allows 15 round trips on a long path", () => {
  expect(handshakeDeadlineMs(sshKeepalive.connectDeadlineMs, 1)).toBe(4_000);
  expect(handshakeDeadlineMs(sshKeepalive.connectDeadlineMs, 266)).toBe(4_000);
  expect(handshakeDeadlineMs(sshKeepalive.connectDeadlineMs, 800)).toBe(12_000);
  expect(handshakeDeadlineMs(300, 100)).toBe(1_500);
});
