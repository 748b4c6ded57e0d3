/**
 * Reading the text of a definition or the settings: a regular file within a size cap, opened once
 * and checked on the opened descriptor (src/files), so a FIFO, a directory or a device named as a
 * definition is an error at once instead of a `validate` or a daemon pass that never returns.
 */
import { readRegularText } from "../files/index.js";

/** Largest cluster definition read, bytes (1 MiB). A definition is about 1 KB; a heavily commented one stays under 50 KB. */
export const maxDefinitionBytes = 1024 * 1024;

/** Largest settings file read, bytes (4 MiB). Each registered node takes a few hundred bytes; 4 MiB holds thousands. */
export const maxSettingsBytes = 4 * 1024 * 1024;

/**
 * The text of cluster definition `file`. Throws Node's error when it cannot be opened (ENOENT,
 * EACCES), ShardctlError `NotRegularFile` or `FileTooLarge` when it is refused.
 */
export function readClusterText(file: string): Promise<string> {
  return readRegularText(file, { maxBytes: maxDefinitionBytes, what: "cluster definition" });
}

/** The text of settings file `file`; throws as `readClusterText` does. */
export function readSettingsText(file: string): Promise<string> {
  return readRegularText(file, { maxBytes: maxSettingsBytes, what: "settings file" });
}
