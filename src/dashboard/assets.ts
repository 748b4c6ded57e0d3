/**
 * The page's files, built by `npm run build` (vite) into dist/ui and served from memory: read once
 * at start, each also gzipped once for clients that accept it. Hashed files under assets/ never
 * change, so browsers may keep them for a year; index.html is revalidated on every load. Nothing
 * is fetched from anywhere else at run time: the page works offline.
 */
import { readdir, readFile } from "node:fs/promises";
import { extname, join, relative, sep } from "node:path";
import { gzipSync } from "node:zlib";
import { builtFile } from "../files/index.js";

/** Where the build puts the page: dist/ui beside dist/src (run from source, the repository's dist/ui). */
export const defaultAssetsDir = locateAssets();

function locateAssets(): string {
  return builtFile(import.meta.url, "../../ui/");
}

export interface Asset {
  body: Buffer;
  gzip: Buffer;
  type: string;
  /** Content-hashed (under assets/): cacheable for ever. */
  immutable: boolean;
}

const types: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".ico": "image/x-icon",
  ".json": "application/json",
};

/** Every file of `dir` by URL path ("/index.html", "/assets/index-abc.js"); empty when the page is not built. */
export async function loadAssets(dir: string): Promise<Map<string, Asset>> {
  const assets = new Map<string, Asset>();
  const files = await readdir(dir, { recursive: true, withFileTypes: true }).catch(() => []);
  for (const entry of files) {
    if (!entry.isFile()) continue;
    const path = join(entry.parentPath, entry.name);
    const url = "/" + relative(dir, path).split(sep).join("/");
    const body = await readFile(path);
    assets.set(url, { body, gzip: gzipSync(body, { level: 9 }), type: types[extname(path)] ?? "application/octet-stream", immutable: url.startsWith("/assets/") });
  }
  return assets;
}
