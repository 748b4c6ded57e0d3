/**
 * src/files: the few local-file helpers every concern shares (atomic writes, existence checks, and
 * reading files others control: regular files only, within a stated size cap, never blocking).
 */
export { builtFile } from "./built-file.js";
export { writeFileAtomic } from "./write-file-atomic.js";
export { entryExists, pathExists } from "./path-exists.js";
export { openRegularFile, readRegularFile, readRegularText, formatCap, FileRefusedError, type OpenedRegularFile, type RegularFileOptions } from "./read-regular-file.js";
export { workingTreeOf, isWithin } from "./working-tree.js";
export { cannotWriteIn } from "./writable-folder.js";
export { makeFolders } from "./make-folders.js";
export { sweepDrafts } from "./sweep-drafts.js";
export { roomLeft } from "./room-left.js";
export { untrustedOwner } from "./trust-owner.js";
export { closeInTurn, readInTurn, readChunkInTurn, sourceReadDeadlineMs, type ChunkRead } from "./source-reads.js";
