// Marks the programs package.json's `bin` names as executable after `tsc` wrote them (tsc writes
// 0644): `npx shardctl` in this repository runs dist/src/cli/shardctl.js itself, through a shell.
// `npm install` of the packed tarball sets the bit on its own copy; this covers the repository.
import { chmod, readFile, stat } from "node:fs/promises";
import { join } from "node:path";

const root = join(import.meta.dirname, "..");
const manifest = JSON.parse(await readFile(join(root, "package.json"), "utf8"));
for (const path of Object.values(manifest.bin)) {
  const file = join(root, path);
  const { mode } = await stat(file);
  // Execute for whoever may read it (0644 → 0755), nothing more.
  await chmod(file, mode | ((mode & 0o444) >> 2));
}
