/**
 * The two commits a status names, labelled as `shardctl status` labels them: the definition commit
 * (the last commit that touched the definition file) and the commit the daemon's checkout is at.
 * They differ when later commits changed other files, or when the checkout is behind or ahead.
 */
import type { StatusView } from "./status-types.js";

export interface CommitLabel {
  /** "definition commit" or "checkout at", the CLI's words. */
  label: string;
  /** The one-word form for a table cell: "commit" or "checkout". */
  shortLabel: string;
  /** The full commit id. */
  commit: string;
  /** What the commit is, for a title attribute. */
  title: string;
}

/** The commits the status has, definition commit first; none outside a git repository. */
export function commitsOf(status: Pick<StatusView, "gitCommit" | "gitHead" | "file">): CommitLabel[] {
  return [
    ...(status.gitCommit === undefined
      ? []
      : [
          {
            label: "definition commit",
            shortLabel: "commit",
            commit: status.gitCommit,
            title: `definition commit ${status.gitCommit}: the last commit that touched ${status.file}`,
          },
        ]),
    ...(status.gitHead === undefined
      ? []
      : [
          {
            label: "checkout at",
            shortLabel: "checkout",
            commit: status.gitHead,
            title: `checkout at ${status.gitHead}: the commit the daemon's checkout of the definitions is at (HEAD)`,
          },
        ]),
  ];
}
