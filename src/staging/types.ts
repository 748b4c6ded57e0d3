/** Shapes shared across staging: manifests, sources, classification and progress. */

/** A file of the model as its source describes it. */
export interface ManifestFile {
  /** Repository-relative path (checked by assertSafePath). */
  path: string;
  size: number;
  /** sha256 hex for LFS files and pushed files; the git blob sha1 for small Hub files (all the Hub gives). */
  hash: string;
  hashAlgo: "sha256" | "git-sha1";
}

/** A model revision pinned to one commit. */
export interface Manifest {
  /** Repository id ("org/name"): names the cache folder models--org--name. */
  repo: string;
  /** What was asked for (a branch, tag or commit). */
  revision: string;
  /** The commit the revision resolved to; the snapshot folder name. */
  commit: string;
  files: ManifestFile[];
}

export type StagingSource =
  /** The node downloads from a Hub endpoint itself (HF_ENDPOINT-style). */
  | { kind: "hub"; endpoint: string; repo: string; revision: string; token?: string }
  /** The control node hashes `dir` and streams its files over SFTP. */
  | { kind: "push"; dir: string; repo: string; revision?: string }
  /** The node already holds the model at `path`: verify only, never write. */
  | { kind: "path"; path: string };

export type FileState = "present" | "missing" | "partial" | "mismatched";
export type NodeState = "present" | "needs-download" | "mismatched";

export interface FileCheck {
  file: ManifestFile;
  state: FileState;
  /** Bytes already in place (the .incomplete size for a partial file). */
  haveBytes: number;
  /** A mismatched file's size on disk: room its replacement takes back, as it is removed first. */
  mismatchedBytes?: number;
  /** True when the snapshot link must be (re)made. */
  linkMissing: boolean;
}

export interface NodeClassification {
  node: string;
  state: NodeState;
  files: FileCheck[];
  /** Files hashed during classification (0 when the stat cache answered everything). */
  hashedFiles: number;
}

export interface StagingProgress {
  node: string;
  /** "waiting": another staging holds `file` on the node (it stages it there): see `holder`. */
  phase: "classify" | "waiting" | "transfer" | "verify" | "link" | "done";
  file?: string;
  /**
   * In the "waiting" phase: who holds the node's lock of the file, as it says (`shardctl (pid 4242
   * on ctl-1)`: another process); none when it is another staging of this process (another cluster
   * of the same daemon staging the same file there).
   */
  holder?: string;
  bytesDone: number;
  bytesTotal: number;
  /** Bytes per second over the transfer so far. */
  rateBytesPerSec: number;
  /** Seconds left at the current rate; undefined before a rate is known. */
  etaSec: number | undefined;
}

export interface StagingOptions {
  /** Files the node needs (repository-relative), or "all". Default "all". */
  files?: string[] | "all";
  /** "fast" trusts the stat cache; "full" re-hashes every file. Default "fast". */
  verify?: "fast" | "full";
  onProgress?: (event: StagingProgress) => void;
  /** Attempts per file for a download or push before giving up (each resumes). Default 3. */
  attempts?: number;
  /** Per-file transfer deadline, ms (an attempt cut there resumes in the next). Default 3600000. */
  transferDeadlineMs?: number;
  /** A download that receives nothing for this long, ms, is cut and resumed in the next attempt. Default 60000. */
  transferIdleMs?: number;
  /**
   * Stops the staging when aborted: no further file starts, the transfer in flight is cut (its
   * partial file kept for a later staging to resume), and so is a file's hashing. The node then
   * fails with StagingCancelled.
   */
  signal?: AbortSignal;
  /**
   * Awaited with the node's name before each piece of its heavy work: each file's transfer (taken
   * under that file's locks, so a staging that waits for another's download of the same file holds
   * no turn meanwhile), or its classification when that hashes every file (`verify = "full"`); the
   * work gives the turn back by calling what it resolves to. Where a caller limits how much transfers
   * and hashes at once on a node; a node whose files are in place by the stat cache never calls it.
   * It must settle once `signal` aborts; rejecting fails the node with that error.
   */
  takeTurn?: (node: string) => Promise<() => void>;
}

export interface NodeStagingResult {
  node: string;
  before: NodeState;
  /** Bytes moved onto the node by this run. */
  bytesTransferred: number;
  filesTransferred: number;
  hashedFiles: number;
  /** Where the model now is on the node (the snapshot folder, or the path for source "path"). */
  modelPath: string;
}
