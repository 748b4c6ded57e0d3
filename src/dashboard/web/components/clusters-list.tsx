/** Every cluster as one row, like a session list, filtered by health. */
import { commitsOf } from "../commits.js";
import { mainReasonOf } from "../condition-tone.js";
import { formatAge, short } from "../format.js";
import { stageCountOf, stagesUnknownOf, stagesUpOf } from "../stage-count.js";
import type { Health, StatusView } from "../status-types.js";
import { ClusterBadge, HealthBadge } from "./badges.js";
import { ScrollBox } from "./scroll-box.js";

const healths: Health[] = ["Healthy", "Progressing", "Degraded", "Unhealthy", "Stalled", "Stopped", "Suspended", "Disabled"];

export interface ClustersListProps {
  clusters: StatusView[];
  /** Clusters whose status is the file an earlier daemon wrote, not yet checked by the daemon that runs now. */
  unchecked: ReadonlySet<string>;
  /** Clusters whose status file the daemon could not write (its reason and message). */
  fileFailures: ReadonlyMap<string, { reason: string; message: string }>;
  filter: Health | "all";
  onFilter: (filter: Health | "all") => void;
  now: number;
  stale: boolean;
}

export function ClustersList({ clusters, unchecked, fileFailures, filter, onFilter, now, stale }: ClustersListProps) {
  const shown = filter === "all" ? clusters : clusters.filter((c) => c.health === filter);
  return (
    <section aria-labelledby="h-clusters" class={stale ? "stale" : undefined}>
      <div class="page-head">
        <h1 id="h-clusters">Clusters</h1>
        <label class="filter">
          Health{" "}
          <select value={filter} onChange={(e) => onFilter((e.currentTarget as HTMLSelectElement).value as Health | "all")} data-testid="health-filter">
            <option value="all">all ({clusters.length})</option>
            {healths.map((h) => (
              <option value={h} key={h}>
                {h} ({clusters.filter((c) => c.health === h).length})
              </option>
            ))}
          </select>
        </label>
      </div>
      {shown.length === 0 ? (
        <p class="muted">{clusters.length === 0 ? "The daemon has no cluster status yet." : `No cluster is ${filter}.`}</p>
      ) : (
        <ScrollBox label="Clusters table">
          <table class="clusters" data-testid="clusters-table">
            <thead>
              <tr>
                <th scope="col">name</th>
                <th scope="col">kind</th>
                <th scope="col">health</th>
                <th scope="col">model</th>
                <th scope="col">stages</th>
                <th scope="col">endpoint</th>
                <th scope="col">revision</th>
                <th scope="col">age</th>
              </tr>
            </thead>
            <tbody>
              {shown.map((c) => {
                const planned = stageCountOf(c);
                const up = stagesUpOf(c);
                const unknown = c.stages.length === 0 ? 0 : stagesUnknownOf(c);
                const ready = c.conditions.find((x) => x.type === "Ready");
                const commits = commitsOf(c);
                const why = mainReasonOf(c);
                return (
                  <tr key={c.cluster} data-cluster={c.cluster} class={unchecked.has(c.cluster) ? "stale" : undefined}>
                    <th scope="row">
                      <a href={`#/clusters/${encodeURIComponent(c.cluster)}`}>{c.cluster}</a>
                    </th>
                    <td>
                      <ClusterBadge stages={planned} />
                    </td>
                    <td>
                      <HealthBadge health={c.health} />
                      {unchecked.has(c.cluster) ? (
                        // Said in words, not only greyed: the health is an earlier daemon's word.
                        <span
                          class="unchecked-tag small"
                          title="the status file an earlier daemon wrote; the daemon that runs now has not checked this cluster yet"
                          data-testid="unchecked-tag"
                        >
                          {" "}
                          not checked yet
                        </span>
                      ) : null}
                      {c.definitionRemoved === true ? (
                        <span
                          class="unchecked-tag small"
                          title="its definition file is gone: the daemon tears it down, or its prune is held up or refused (the cluster page says why)"
                          data-testid="definition-removed-tag"
                        >
                          {" "}
                          definition removed
                        </span>
                      ) : null}
                      {fileFailures.has(c.cluster) ? (
                        <span class="unchecked-tag small" title={fileFailures.get(c.cluster)!.message} data-testid="file-failure-tag">
                          {" "}
                          status file not written
                        </span>
                      ) : null}
                      {why === undefined ? null : " "}
                      {why === undefined ? null : (
                        // Why it is not Healthy, in a word or three; the whole message on hover and on its page.
                        <span class="health-why muted small" title={why.message} data-testid="health-why">
                          {why.type} {why.status}: {why.reason}
                        </span>
                      )}
                    </td>
                    <td class="model">{c.model ?? "–"}</td>
                    <td data-testid="stage-count">
                      {up}/{planned}
                      {unknown === 0 ? null : (
                        <span class="muted small" title="stages whose node did not answer their liveness probe: they may well run">
                          {" "}
                          ({unknown} unknown)
                        </span>
                      )}
                    </td>
                    <td>
                      {c.coordinator?.url ?? c.router?.url ?? "–"}
                      {c.coordinator?.health !== "unknown" ? null : (
                        <span class="muted small" title="its node did not answer, or a teardown could not reach it: it may or may not run">
                          {" "}
                          (health unknown)
                        </span>
                      )}
                    </td>
                    <td>
                      <code>{short(c.observedRevision)}</code>
                      {commits.length === 0 ? null : (
                        <span class="commits muted small" data-testid="commits">
                          {commits.map((x, i) => (
                            <span key={x.label} title={x.title}>
                              {i === 0 ? "" : " · "}
                              {x.shortLabel} <code>{x.commit.slice(0, 7)}</code>
                            </span>
                          ))}
                        </span>
                      )}
                    </td>
                    <td>{ready?.status === "True" ? formatAge(ready.lastTransitionTime, now) : "–"}</td>
                  </tr>
                );
              })}
            </tbody>
          </table>
        </ScrollBox>
      )}
    </section>
  );
}
