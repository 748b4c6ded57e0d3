/** src/files: the few local-file helpers every concern shares (atomic writes, existence checks). */
export { writeFileAtomic } from "./write-file-atomic.js";
export { pathExists } from "./path-exists.js";
