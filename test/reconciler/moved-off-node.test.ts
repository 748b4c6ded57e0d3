/**
 * A cluster replaced by a revision that no longer uses one of its nodes: its run folder there
 * (launch files, token, engine logs, the claim) is removed with the teardown, as a prune removes
 * every one; the folders of the nodes it still uses stay for the new launch. Before, it stayed for
 * ever, and its claim held off another daemon's cluster of the name there for ten minutes.
 */
import { stat } from "node:fs/promises";
import { join } from "node:path";
import { expect, it } from "vitest";
import { useDaemonWorld } from "./use-daemon-world.js";

const dw = useDaemonWorld({ sshNodes: 3 });

/** Whether `path` exists. */
async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  );
}

it("the run folder on a node the new revision dropped is removed; the one on a node it keeps stays", async () => {
  const { world } = dw;
  // The sshd nodes run as this user on this machine: their folders are looked at here.
  const folderOn = (index: number): string => join(world.sshd!.nodes[index]!.modelDir, ".shardctl", "run", "mover");
  const first = await dw.define("mover", { nodes: ["n1", "n2"] });
  await dw.waitServing("mover", first);
  expect(await exists(join(folderOn(1), "cluster.toml"))).toBe(true);

  const second = await dw.define("mover", { nodes: ["n1", "n3"] });
  await dw.waitServing("mover", second);
  expect(await exists(folderOn(1))).toBe(false);
  expect(await exists(join(folderOn(0), "cluster.toml"))).toBe(true);
  expect(await exists(join(folderOn(2), "cluster.toml"))).toBe(true);
}, 90_000);
