/**
 * Reasons of staging a model on the nodes (src/staging). Terminal ones are those a retry repeats
 * exactly: a bad listing or file name, a full disk, a source whose bytes are not what it lists.
 */
export type StagingReason =
  /** The Hub did not answer a listing request, or its body stopped before the deadline (transient). */
  | "HubUnreachable"
  /** The Hub refused the token, or wants one (terminal). */
  | "HubUnauthorized"
  /** The Hub has no such repository or revision (terminal). */
  | "HubNotFound"
  /** The Hub answered an error status or an unusable listing (transient). */
  | "HubError"
  /** The Hub's file list has an entry staging cannot use: not an object, a path that is not a string, a path listed twice; or it is over 64 MiB (terminal). */
  | "HubListingInvalid"
  /** The push source folder holds no files (terminal). */
  | "PushSourceEmpty"
  /** The push source holds a symlink to something other than a regular file (terminal). */
  | "PushSourceInvalid"
  /** A push source file changed size since it was hashed; the next pass hashes it again (transient). */
  | "PushSourceChanged"
  /** Pushing a file to the node over SFTP failed (transient). */
  | "PushFailed"
  /** A listed file name could escape the model folder (terminal). */
  | "UnsafeFileName"
  /** A stage asks for a file the source does not list (terminal). */
  | "FileNotInSource"
  /** The model lists more small files (JSON, tokenizer, templates) than any model has: staged one by one, they would take hours (terminal). */
  | "TooManyModelFiles"
  /** Two files a node needs differ only in case or Unicode form: one would overwrite the other on macOS (terminal). */
  | "FileNamesCollide"
  /** Source "path" has no file list of its own and none was given (terminal). */
  | "ManifestRequired"
  /** Source "path": the node's copy is missing files or differs from the list (terminal). */
  | "ModelNotPresent"
  /** The node's free space could not be read, so nothing is transferred (transient). */
  | "DiskSpaceUnknown"
  /** The node has less free space than the missing files need (terminal). */
  | "InsufficientDisk"
  /** Downloading a file failed: network, HTTP status, curl on the node (transient). */
  | "DownloadFailed"
  /** A file's download passed the size its source lists; stopped there and its partial file removed (terminal). */
  | "DownloadTooLarge"
  /** A file arrived with the wrong hash; terminal when fetched whole from a pinned Hub commit, transient otherwise. */
  | "ChecksumMismatch"
  /** Staging was stopped by its caller (the definition moved on): the transfer in flight was cut, its partial file kept (transient). */
  | "StagingCancelled"
  /** A node failed with an error that has no reason of its own (transient). */
  | "StagingFailed";
