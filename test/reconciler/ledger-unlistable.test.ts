/**
 * The periodic resync lists the ledger; a ledger that cannot be listed (its folder replaced by a
 * file here; out of descriptors in the field) must not end the daemon. Regression: the resync's
 * rejection was unhandled, the daemon process exited about one resync after, and its clusters ran
 * on unsupervised with their status files frozen. Now the resync says so and looks at every known
 * cluster again; the daemon supervises on, and a death after the ledger is back is relaunched.
 */
import { mkdir, rename, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { expect, test } from "vitest";
import { killStage, waitForStatus } from "./daemon-fixture.js";
import { isServingAt, useDaemonWorld } from "./use-daemon-world.js";

const dw = useDaemonWorld({ settings: { enabled: true }, resyncMs: 300 });

test("a ledger that cannot be listed at a resync: the daemon goes on, and relaunches a death once it can", async () => {
  const { world } = dw;
  const revision = await dw.define("unlistable", { nodes: ["l1", "l2"] });
  const serving = await dw.waitServing("unlistable", revision);
  const ledger = join(world.stateDir, "ledger");
  const aside = `${ledger}.aside`;
  await rename(ledger, aside);
  await writeFile(ledger, "not a folder\n");
  // Several resyncs (300 ms apart) meet the file in the folder's place.
  await new Promise((r) => setTimeout(r, 2_000));
  await rm(ledger);
  await mkdir(ledger).catch(() => undefined);
  await rm(ledger, { recursive: true });
  await rename(aside, ledger);
  await killStage(serving, 1);
  const back = await waitForStatus(world, "unlistable", (s) => (s.restarts?.count ?? 0) >= 2 && isServingAt(s, revision), 90_000);
  expect(back.health).toBe("Healthy");
}, 180_000);
