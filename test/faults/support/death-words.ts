/**
 * What the link-cut fault tests read while a cut runs its course: the status file's words for a
 * death (does any name a member as the one that stopped answering?), Ready as it changed, what each
 * member logged of its links before a relaunch replaced its log, and the engine processes per
 * place. No vitest imports.
 */
import { readFile } from "node:fs/promises";
import { Ledger } from "../../../src/launch/index.js";
import type { ClusterStatus } from "../../../src/reconciler/index.js";
import { conditionOf, enginesOf, readStatusFile, sleep, type DaemonWorld } from "../../reconciler/daemon-fixture.js";
import type { Lab } from "./netns.js";

/** record-death.ts's words when it names one member as the one that went silent: "<member> on <node> stopped answering (<reporter> heard …". */
export const namesSilentMember = /\S+ on \S+ stopped answering \(/;

/** Every text of a status that says what a death was: Ready's and Reconciling's messages, lastError, the restart evidence, the timeline. */
export function deathWordings(status: ClusterStatus): Array<{ where: string; text: string }> {
  return [
    ...status.conditions.filter((c) => c.type === "Ready" || c.type === "Reconciling").map((c) => ({ where: c.type, text: c.message ?? "" })),
    { where: "lastError", text: status.lastError?.message ?? "" },
    ...(status.restarts?.evidence ?? []).map((e, i) => ({ where: `restarts.evidence[${i}]`, text: e.message })),
    ...status.timeline.map((e) => ({ where: `timeline ${e.step}`, text: e.detail ?? "" })),
  ];
}

/** A member's "peer silent" line (src/engine/exit-status.ts): `reporter` declared `peer` dead for silence. */
export interface SilentReport {
  reporter: string;
  peer: string;
}

export interface DeathWatchResult {
  /** Each wording that named a silent member, with when and where it was written (at most 10). */
  namings: string[];
  /** Ready as it was written, each change once, timed from `since`. */
  readyLines: string[];
  /** Per member, what it logged of its links (silent, answering, broke). */
  lastWords: string[];
  /** Every "peer silent" line of the members' last logs. */
  silentReports: SilentReport[];
}

/**
 * Watch the status file (every 20 ms) and the members' logs until stopped: the wordings that name a
 * silent member, Ready as it changed, and each member's log as it last was before a relaunch
 * replaced it (what each said of its links), all timed from `since`.
 */
export async function watchDeathWords(world: DaemonWorld, cluster: string, since: number): Promise<{ stop(): Promise<DeathWatchResult> }> {
  const namings: string[] = [];
  const readyLines: string[] = [];
  const logs = new Map<string, string>();
  const replaced = new Set<string>();
  const logFiles = ((await new Ledger(world.stateDir).read(cluster))?.processes ?? []).map(
    (p) => [p.index === undefined ? p.role : `${p.role}-${p.index}`, p.logFile] as const,
  );
  let watching = true;
  const loop = (async () => {
    let last = "";
    while (watching) {
      for (const [label, file] of logFiles) {
        const text = await readFile(file, "utf8").catch(() => "");
        if (replaced.has(label) || text.length < (logs.get(label)?.length ?? 0)) replaced.add(label);
        else logs.set(label, text);
      }
      const status = await readStatusFile(world, cluster).catch(() => undefined);
      const text = status === undefined ? "" : JSON.stringify(status);
      if (status !== undefined && text !== last) {
        last = text;
        const at = `+${Date.now() - since} ms`;
        const ready = conditionOf(status, "Ready");
        const line = `Ready=${ready?.status} ${ready?.reason}: ${ready?.message ?? ""}`;
        if (!readyLines.at(-1)?.endsWith(line)) readyLines.push(`${at} ${line}`);
        for (const { where, text: wording } of deathWordings(status)) {
          if (namesSilentMember.test(wording) && namings.length < 10) namings.push(`${at} ${where}: ${wording}`);
        }
      }
      await sleep(20);
    }
  })();
  return {
    stop: async () => {
      watching = false;
      await loop;
      const said = /"msg":"(peer silent|peer answering|stage \d+: .* broke \(|pipeline broken)/;
      const lastWords = [...logs].map(
        ([label, text]) =>
          `${label}: ${
            text
              .split("\n")
              .filter((l) => said.test(l))
              .join("\n    ") || "(nothing of its links)"
          }`,
      );
      const silentReports = [...logs].flatMap(([reporter, text]) => text.split("\n").flatMap((line) => silentPeerOf(reporter, line)));
      return { namings, readyLines, lastWords, silentReports };
    },
  };
}

function silentPeerOf(reporter: string, line: string): SilentReport[] {
  if (!line.includes('"peer silent"')) return [];
  try {
    const entry = JSON.parse(line) as Record<string, unknown>;
    return entry.msg === "peer silent" && typeof entry.peer === "string" ? [{ reporter, peer: entry.peer }] : [];
  } catch {
    return [];
  }
}

/** Engine processes proper (node running shard-engine, not the wrappers naming it): per lab host, then the root namespace's. */
export async function enginesPerPlace(world: DaemonWorld, lab: Lab): Promise<number[]> {
  const lines = (await enginesOf(world)).filter((line) => {
    const [, , program, ...args] = line.split(/\s+/);
    return /(^|\/)node$/.test(program ?? "") && /shard-engine/.test(args.find((arg) => !arg.startsWith("--")) ?? "");
  });
  const perHost = await Promise.all(lab.hosts.map(async (h) => new Set(await h.pids())));
  const counts = perHost.map((pids) => lines.filter((l) => pids.has(Number(l.split(/\s+/)[0]))).length);
  return [...counts, lines.length - counts.reduce((a, b) => a + b, 0)];
}
