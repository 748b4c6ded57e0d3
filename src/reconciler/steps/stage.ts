/**
 * Stage the model on every node: the files each stage needs, the coordinator's config and
 * tokenizer, verified. Progress goes to the status file's staging cards as it happens. A node that
 * failed is named; a failure retrying cannot fix (a file the Hub serves corrupt, a `path` source
 * that is not a verified copy) stalls instead of retrying for ever.
 *
 * A serving cluster edited to a new revision has it staged ahead, while the old revision serves:
 * a download of hours, or one that fails (the Hub down, a corrupt file), then costs no outage; the
 * old revision is replaced only once the new one's files are in place. Staging writes each file
 * under a temporary name and renames it into place, so the files the old processes have open stay
 * as they were. A cluster with nothing serving (a first launch, a relaunch after a death) stages
 * after the replace, as before.
 */
import { stageForCluster, stagingFailureOf } from "../../cluster/index.js";
import { isShardctlError, messageOf, ShardctlError } from "../../errors/index.js";
import type { NodeStagingResult } from "../../staging/index.js";
import { definitionOf, replacing, type Pass } from "../pass.js";
import type { Step } from "../run-step.js";
import { calledOff, isServing, notServingYet, setConditions, type Verdict } from "../verdicts.js";

/** Stage after the replace: nothing serves (any more); Ready says the pass stages. Skipped when the pass staged ahead. */
export const stage: Step = {
  name: "stage",
  yieldsToCallOff: true,
  action: "stage",
  failure: "StagingFailed",
  progress: (pass) => (pass.staged === undefined ? { reason: "Staging", message: "staging the model on every node", announce: true } : undefined),
  async run(pass) {
    if (pass.staged !== undefined) return;
    return stageModel(pass, false);
  },
};

/** Stage before the replace, while the running revision serves: Ready stays as it is. */
export const stageAhead: Step = {
  name: "stage-ahead",
  yieldsToCallOff: true,
  action: "stage",
  failure: "StagingFailed",
  progress: (pass) =>
    servesWhileStaging(pass)
      ? { reason: "Staging", message: `staging this revision on every node while revision ${pass.entry!.revision.slice(0, 12)} serves`, announce: true }
      : undefined,
  async run(pass) {
    if (!servesWhileStaging(pass)) return;
    return stageModel(pass, true);
  },
};

/**
 * The pass replaces a launch that serves, whole (nothing gone, not half-launched or half-torn-down):
 * it can stage first. What is broken is torn down first, as a port it holds may be.
 */
function servesWhileStaging(pass: Pass): boolean {
  return replacing(pass) === "whole" && pass.entry !== undefined && isServing(pass.memory);
}

async function stageModel(pass: Pass, ahead: boolean): Promise<Verdict | void> {
  const { spec, revision } = definitionOf(pass);
  const { memory, settings } = pass;
  const planned = memory.planned;
  if (planned === undefined) throw new Error("stage step without a plan");
  // Staged at this revision before this pass: a node that needs files now lost them since.
  const wasStaged = memory.conditions.some((c) => c.type === "Staged" && c.status === "True" && c.observedRevision === revision);
  // Ahead, the old revision serves: Ready stays its.
  const sayStaging = (doing?: string): void => {
    if (!ahead) setConditions(memory, revision, { Ready: notServingYet(memory, "Staging", doing) });
  };
  sayStaging();
  // A staging may take hours (a large model's download): the pass gives its place in the work
  // queue back, so other clusters' passes (a delete, a relaunch) go on, and takes a staging place
  // on a node for each file it transfers there (or while it hashes every file, `verify = "full"`):
  // a relaunch whose files are in place never waits behind other clusters' downloads, nor a node's
  // transfer behind another node's.
  pass.stepAside?.();
  const places = pass.world.stagingPlaces;
  const takeTurn = async (node: string): Promise<() => void> => {
    if (places.full(node)) {
      // Said while it waits: a staging that has not begun is not one that is slow.
      const waiting = `waiting for a staging place on ${node} (${places.perNode} transfers at once on a node)`;
      sayStaging(waiting);
      setCard(memory, node, (card) => ({ ...card, state: "staging", reason: "WaitingForPlace", message: waiting }));
      await pass.world.writeStatus(pass.name, memory, { action: "stage", result: "waiting", health: "Progressing" }, settings);
    }
    const release = await places.acquire(node, pass.callOff);
    if (release === undefined) throw new ShardctlError("StagingCancelled", `node ${node}: the staging was called off while it waited for a staging place there`);
    setCard(memory, node, ({ reason: _reason, message: _message, ...card }) => ({ ...card, state: "staging" }));
    sayStaging();
    return release;
  };
  // The cards are this revision's: a staging of another revision starts them again (each node's is
  // made from its events; a node whose files are in place says so with 0 of 0 bytes), or its bytes
  // would read as this one's. A later pass of the same revision keeps them, so that a node that
  // failed keeps saying why until its next event.
  if (memory.stagingRevision !== revision) {
    memory.staging = [];
    memory.stagingRevision = revision;
  }
  // A progress event after the staging answered (none is expected) must not rewrite the cards of
  // a pass that has ended.
  let answered = false;
  try {
    const staged = await stageForCluster(spec, settings, planned, pass.world.nodesOf(spec, settings), {
      onProgress: (event) => {
        if (answered) return;
        // Waiting for another staging of a file on the node: said on the node's card (a staging that
        // does not move is not a slow one) until its next event.
        const waiting =
          event.phase !== "waiting"
            ? undefined
            : event.holder === undefined
              ? `waiting for another staging of this daemon, which transfers ${event.file ?? "a file"} there (the same file: it is transferred once)`
              : `waiting for ${event.holder}, which stages ${event.file ?? "a file"} there (shardctl stage, or another daemon)`;
        if (waiting !== undefined)
          pass.world.log.info({ cluster: pass.name, node: event.node, file: event.file, holder: event.holder }, `node ${event.node}: ${waiting}`);
        const next = {
          node: event.node,
          state: event.phase === "done" ? ("present" as const) : ("staging" as const),
          bytesDone: event.bytesDone,
          bytesTotal: event.bytesTotal,
          ...(waiting === undefined ? {} : { reason: "WaitingForLock", message: waiting }),
        };
        setCard(memory, event.node, () => next);
        pass.world.writeProgress(pass.name, memory, { action: "stage", result: "waiting", health: "Progressing" }, settings);
      },
      takeTurn,
      ...(pass.callOff === undefined ? {} : { signal: pass.callOff }),
    }).finally(() => {
      answered = true;
    });
    const failure = stagingFailureOf(staged);
    if (failure !== undefined) {
      // A node that failed is not left saying "staging" (with the bytes of the moment it failed)
      // while the pass waits to retry; its card says why, so the node's row can.
      const failed = new Map(staged.failed.map((f) => [f.node, { state: "failed" as const, reason: f.reason, message: f.message }]));
      memory.staging = memory.staging.map((card) => ({ ...card, ...failed.get(card.node) }));
      for (const [node, why] of failed) {
        if (!memory.staging.some((card) => card.node === node)) memory.staging.push({ node, bytesDone: 0, bytesTotal: 0, ...why });
      }
      memory.staging.sort((a, b) => a.node.localeCompare(b.node, "en", { numeric: true }));
      // Cut because the launch was called off: not a failure of this revision's staging.
      if (pass.callOff?.aborted === true) return calledOff(memory, revision, "stage", pass.callOff);
      throw failure;
    }
    pass.staged = staged;
    // What this revision was staged at: as this daemon staged it, else as the launch of it that runs
    // (or ran) recorded it, for a daemon restarted since (a Hub branch is resolved again then).
    const recorded = pass.entry?.revision === revision ? pass.entry.modelCommit : undefined;
    const before = memory.stagedCommit?.revision === revision ? memory.stagedCommit.commit : recorded;
    if (staged.commit !== undefined) memory.stagedCommit = { revision, commit: staged.commit };
    const changed = before !== undefined && staged.commit !== undefined && before !== staged.commit;
    if (changed) {
      pass.world.log.warn(
        { cluster: pass.name, was: before, now: staged.commit },
        `the model at ${spec.model.id} changed since this revision was staged: its new files were staged, and this launch serves them`,
      );
    }
    const repaired = changed ? [] : repairedNodes(staged.staged, wasStaged);
    for (const { node, why, bytes } of repaired) {
      pass.world.log.warn({ cluster: pass.name, node, bytes }, `node ${node} ${why}: its files were fetched again and verified`);
    }
    const repairs = changed
      ? `; the model at ${spec.model.id} changed since this revision was staged (its files now hash to ${staged.commit!.slice(0, 12)}, were ${before.slice(0, 12)}): the new files were staged`
      : repaired.map(({ node, why }) => `; repaired on ${node}, which ${why}`).join("");
    setConditions(memory, revision, {
      Staged: {
        status: "True",
        reason: "AllNodesPresent",
        message: `model present on ${spec.nodes.length} stage nodes and the coordinator's (${staged.bytesTransferred} bytes transferred this pass)${repairs}`,
      },
    });
  } catch (error) {
    setConditions(memory, revision, { Staged: { status: "False", reason: isShardctlError(error) ? error.reason : "StagingFailed", message: messageOf(error) } });
    throw error;
  }
}

/**
 * The nodes whose copy of the model was damaged and repaired this pass: files of the wrong size or
 * checksum, or (when the revision was staged before) files gone since. A disk or a hand that changes
 * a model's files under the daemon is worth an operator's look, not only a silent fix.
 */
function repairedNodes(staged: readonly NodeStagingResult[], wasStaged: boolean): Array<{ node: string; why: string; bytes: number }> {
  return staged.flatMap((result) => {
    if (result.before === "mismatched") return [{ node: result.node, why: "held model files that did not match their size or checksum", bytes: result.bytesTransferred }];
    if (result.before === "needs-download" && wasStaged) return [{ node: result.node, why: "lost model files since they were staged", bytes: result.bytesTransferred }];
    return [];
  });
}

type StagingCard = Pass["memory"]["staging"][number];

/** Set `node`'s staging card to what `change` makes of it (a new card from zero bytes when it has none), keeping the cards in node order. */
function setCard(memory: Pass["memory"], node: string, change: (card: StagingCard) => StagingCard): void {
  const card = memory.staging.find((s) => s.node === node) ?? { node, state: "staging", bytesDone: 0, bytesTotal: 0 };
  memory.staging = [...memory.staging.filter((s) => s.node !== node), change(card)].sort((a, b) => a.node.localeCompare(b.node, "en", { numeric: true }));
}
