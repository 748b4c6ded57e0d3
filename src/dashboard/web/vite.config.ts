// Builds the dashboard page (src/dashboard/web) into dist/ui, which the daemon serves from memory.
// Relative asset URLs (base "./") so the page works under any path; no CDN, nothing fetched at run time.
import { fileURLToPath } from "node:url";
import { defineConfig } from "vite";

export default defineConfig({
  root: fileURLToPath(new URL(".", import.meta.url)),
  base: "./",
  logLevel: "warn",
  oxc: { jsx: { runtime: "automatic", importSource: "preact" } },
  build: {
    outDir: fileURLToPath(new URL("../../../dist/ui", import.meta.url)),
    emptyOutDir: true,
    target: "es2022",
    // One small script and one stylesheet: inlining the CSS would need 'unsafe-inline' in the CSP.
    assetsInlineLimit: 0,
    // Every browser that runs the page knows modulepreload: no polyfill in the bundle.
    modulePreload: { polyfill: false },
    reportCompressedSize: false,
  },
});
