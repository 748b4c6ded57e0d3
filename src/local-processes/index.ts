/**
 * src/local-processes: processes of this machine, named by the files they write (locks, drafts).
 */
export { lookAtProcess, type ProcessSighting } from "./look-at-process.js";
