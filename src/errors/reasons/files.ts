/**
 * Reasons of reading a local file someone else controls (src/files): definitions, settings, a
 * model's JSON files, the router's YAML. Both terminal: only changing the file helps.
 */
export type FileReason =
  /** The path is a FIFO, a directory, a device or a socket, not a regular file (terminal). */
  | "NotRegularFile"
  /** The file is larger than the cap its reader states (terminal). */
  | "FileTooLarge"
  /** A cluster definition is a symbolic link to a file that is no definition (.toml) or lies outside its git working tree (terminal). */
  | "DefinitionLinkRefused";
