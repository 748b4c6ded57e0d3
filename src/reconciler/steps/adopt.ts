/**
 * What runs is this launch (the same revision, or a revision with the same launch identity):
 * keep it, bring a router-only change in line without a restart, and watch it.
 */
import { routerBackendOf, type LedgerEntry } from "../../launch/index.js";
import { engineOf } from "../../engines/index.js";
import type { BackendEntry } from "../../router/index.js";
import { messageOf } from "../../errors/index.js";
import { definitionDigest, type ClusterSpec } from "../../spec/index.js";
import { definitionOf, type Pass } from "../pass.js";
import type { Step } from "../run-step.js";
import { dying, markRunning, recheckUnlessHealthy, setConditions } from "../verdicts.js";
import type { ConditionUpdate } from "../status/index.js";
import { markUnobservable, unobservableConditions, watch } from "./supervise.js";
import { othersInLedger, refuseTakenBackend } from "./refuse-held.js";
import { routerSilence } from "./router-silence.js";
import type { ObservabilityEvent } from "../../health/index.js";

export const adopt: Step = {
  name: "adopt",
  action: "none",
  failure: "RouterRegistrationFailed",
  async run(pass) {
    const { spec, revision } = definitionOf(pass);
    const entry = pass.entry;
    if (entry === undefined) throw new Error("adopt step without a ledger entry");
    // Watched first: a router that hangs or refuses the in-place change below fails this pass,
    // and what runs must still be watched meanwhile.
    watch(pass, entry);
    // What it holds of its nodes' declared memory, for the launches of other clusters there.
    if (pass.memory.planned !== undefined) pass.world.memoryClaims.hold(pass.name, pass.memory.planned.plan);
    if (entry.revision !== revision) await applyInPlace(pass, entry, spec, revision);
    const unregistered = await registerUnregistered(pass, entry, spec);
    countAdoptedLaunch(pass, revision);
    // A node the supervision cannot observe keeps its condition across a resync: set with the rest,
    // not after them, so that the probes' word in between does not restart its transition time.
    const unobservable = pass.memory.supervision?.unobservable ?? new Map<string, ObservabilityEvent>();
    const cutOff = pass.memory.supervision?.cutOff;
    let health = markRunning(pass.memory, revision, entry, pass.observation, unobservableConditions(unobservable, cutOff));
    if (health === undefined) return dying(pass.memory);
    const registration = unregistered ?? (await confirmRegistration(pass, entry, spec)) ?? routerSilence(pass, entry);
    if (pass.memory.deathRecordedFor === entry.startedAt) return dying(pass.memory);
    if (registration !== undefined) {
      setConditions(pass.memory, revision, { Registered: registration });
      if (health === "Healthy") health = "Degraded";
    }
    // Read again: the router's answer was awaited meanwhile, and a cut-off may have begun or ended since
    // (one that ended has said so itself, and asked for the pass that looks again).
    if (markUnobservable(pass.memory, revision, unobservable, pass.memory.supervision?.cutOff) && health === "Healthy") health = "Degraded";
    return { action: "none", result: "success", health, outcome: recheckUnlessHealthy(pass.memory, health) };
  },
};

/**
 * What runs is a launch at this revision, whoever started it: the revision's launch count is at
 * least 1. A revision applied in place (a router-only edit, perhaps made while no daemon ran) and a
 * memory without the previous status file both start from 0, yet the status must not say that
 * nothing was launched at the revision of a cluster that serves.
 */
function countAdoptedLaunch(pass: Pass, revision: string): void {
  const restarts = pass.memory.restarts;
  if (restarts === undefined || restarts.revision !== revision) pass.memory.restarts = { revision, count: 1, evidence: [] };
  else restarts.count = Math.max(restarts.count, 1);
}

/**
 * A new revision that does not change what the processes run from: record it, and bring the
 * router registration in line (backend name or weight may have changed). No restart. A new name
 * another cluster holds is refused (RouterBackendTaken, see refuse-held.ts) before anything
 * changes: what runs serves on under its old name and revision.
 */
async function applyInPlace(pass: Pass, entry: LedgerEntry, spec: ClusterSpec, revision: string): Promise<void> {
  const { world, name } = pass;
  const registrar = world.registrarFor(pass.settings);
  const url = entry.coordinatorUrl;
  const old = entry.routerBackend;
  const wanted = spec.router.register && url !== undefined ? spec.router.backend : undefined;
  const renamed = wanted !== undefined && wanted !== old;
  if (renamed) {
    refuseTakenBackend(wanted, await othersInLedger(pass), world.launchingBackends, name);
    // Claimed with nothing awaited since the look, until the ledger records it below.
    world.launchingBackends.set(wanted, name);
  }
  try {
    // The new entry first, then the old one out: a renamed backend is never missing in between (the
    // router routes the model to either, one coordinator), where the other order answered 404.
    if (wanted !== undefined) {
      await registrar.register(backendOf(spec, url!));
      entry.routerBackend = wanted;
    }
    if (old !== undefined && (!spec.router.register || old !== spec.router.backend)) {
      await registrar.deregister(old);
      if (entry.routerBackend === old) delete entry.routerBackend;
    }
    entry.revision = revision;
    entry.definitionDigest = definitionDigest(spec);
    await pass.ledger.write(entry);
  } finally {
    if (renamed && world.launchingBackends.get(wanted) === name) world.launchingBackends.delete(wanted);
  }
}

/**
 * A launch that runs unregistered though the definition and the settings want it registered: one
 * launched while `[router] kind` was "none" (a router added to the settings since), or by a daemon
 * of other settings. Registered now, as a launch would have, and recorded in the ledger (so a
 * teardown deregisters it). Returns the Registered condition to show when the router refused
 * (Unknown, the cluster Degraded), undefined otherwise.
 */
async function registerUnregistered(pass: Pass, entry: LedgerEntry, spec: ClusterSpec): Promise<ConditionUpdate | undefined> {
  const url = entry.coordinatorUrl;
  if (entry.routerBackend !== undefined || url === undefined || !spec.router.register || pass.settings.router.kind === "none") return undefined;
  // A death seen meanwhile is torn down, not registered.
  if (pass.memory.deathRecordedFor === entry.startedAt) return undefined;
  const backend = backendOf(spec, url);
  // A name another cluster holds stays that cluster's: this one serves on unregistered, and says why.
  try {
    refuseTakenBackend(backend.name, await othersInLedger(pass), pass.world.launchingBackends, pass.name);
  } catch (error) {
    return { status: "False", reason: "RouterBackendTaken", message: messageOf(error) };
  }
  // Claimed with nothing awaited since the look, until the ledger records it.
  pass.world.launchingBackends.set(backend.name, pass.name);
  // Recorded before it is made, as a launch does: a daemon killed in between still deregisters it.
  entry.routerBackend = backend.name;
  try {
    await pass.ledger.write(entry);
  } finally {
    if (pass.world.launchingBackends.get(backend.name) === pass.name) pass.world.launchingBackends.delete(backend.name);
  }
  try {
    await pass.world.registrarFor(pass.settings).register(backend);
    pass.world.log.info({ cluster: pass.name, backend: backend.name }, "what runs was not registered with the router: registered it");
    return undefined;
  } catch (error) {
    return { status: "Unknown", reason: "RouterRegistrationFailed", message: `could not register backend "${backend.name}" with the router: ${messageOf(error)}` };
  }
}

/**
 * The router still has the backend the ledger says was registered, as it was registered: a router
 * restarted without its admin-API registrations, or a config file edited by hand or restored from
 * an old copy (the entry gone, or naming another URL or other models: every request failing while
 * the status said Registered), is given it again, and the pass says so in the log. Returns the
 * Registered condition to show when the router cannot be asked (Unknown, the cluster Degraded),
 * undefined when the registration stands.
 */
async function confirmRegistration(pass: Pass, entry: LedgerEntry, spec: ClusterSpec): Promise<ConditionUpdate | undefined> {
  const backend = entry.routerBackend;
  const url = entry.coordinatorUrl;
  // Without a router (kind "none") there is nothing to ask: its registrar knows no backend.
  if (backend === undefined || url === undefined || !spec.router.register || pass.settings.router.kind === "none") return undefined;
  const registrar = pass.world.registrarFor(pass.settings);
  try {
    const found = await registrar.lookup(backend);
    const wanted = backendOf(spec, url);
    const differs = found === undefined ? undefined : differenceOf(found, wanted);
    if (found !== undefined && differs === undefined) return undefined;
    // A death seen while the router was asked deregistered it on purpose: not registered again.
    if (pass.memory.deathRecordedFor === entry.startedAt) return undefined;
    if (differs === undefined) pass.world.log.warn({ cluster: pass.name, backend }, "the router no longer has the backend: registering it again");
    else pass.world.log.warn({ cluster: pass.name, backend, differs }, "the router's entry for the backend is not what runs: registering it again");
    await registrar.register(wanted);
    return undefined;
  } catch (error) {
    return { status: "Unknown", reason: "RouterRegistrationFailed", message: `the router cannot confirm backend "${backend}": ${messageOf(error)}` };
  }
}

/**
 * How the router's entry `found` differs from the one `wanted` (its URL, models, weight or upstream
 * model), in words; undefined when it does not. A weight or upstream model the router does not
 * report is not compared: an admin API may keep only the URL and models.
 */
function differenceOf(found: BackendEntry, wanted: BackendEntry): string | undefined {
  const differences = [
    found.url === wanted.url ? undefined : `url ${found.url}, not ${wanted.url}`,
    [...found.models].sort().join("\0") === [...wanted.models].sort().join("\0") ? undefined : `models ${found.models.join(", ")}, not ${wanted.models.join(", ")}`,
    found.weight === undefined || found.weight === (wanted.weight ?? 1) ? undefined : `weight ${found.weight}, not ${wanted.weight ?? 1}`,
    found.upstream_model === undefined || found.upstream_model === wanted.upstream_model
      ? undefined
      : `upstream_model ${found.upstream_model}, not ${wanted.upstream_model ?? "none"}`,
  ].filter((d) => d !== undefined);
  return differences.length === 0 ? undefined : differences.join("; ");
}

/** The router entry of what runs at coordinator `url`, as `spec` names and weighs it (as its launch registered it). */
function backendOf(spec: ClusterSpec, url: string): ReturnType<typeof routerBackendOf> {
  return routerBackendOf(spec.router, url, spec.model.id, engineOf(spec.engine.kind));
}
