/**
 * A status file that stays unwritable fails at every write (many a second while its cluster
 * changes): the feed says the failure once, keeping when it began, says a different failure, and
 * says once that the file is written again.
 */
import { expect, test } from "vitest";
import { StatusFeed, type StatusFileFailure } from "../../src/reconciler/index.js";

test("the same failure is said once, a new one again, and the recovery once", () => {
  const feed = new StatusFeed();
  const said: Array<[string, StatusFileFailure | undefined]> = [];
  feed.on("file", (cluster, failure) => said.push([cluster, failure]));
  const failure = (message: string, at: string): StatusFileFailure => ({ reason: "StatusWriteFailed", message, at });
  for (let i = 0; i < 20; i++) feed.fileWritten("w", failure("EACCES", `2026-12-06T18:00:${String(i).padStart(2, "0")}Z`));
  feed.fileWritten("w", failure("ENOSPC", "2026-12-06T18:01:00Z"));
  feed.fileWritten("w", undefined);
  feed.fileWritten("w", undefined);
  expect(said).toEqual([
    ["w", failure("EACCES", "2026-12-06T18:00:00Z")],
    ["w", failure("ENOSPC", "2026-12-06T18:01:00Z")],
    ["w", undefined],
  ]);
  expect(feed.failedFiles().size).toBe(0);
});
