// ESLint flat config: typescript-eslint's recommended, type-aware rules for src, test and bench.
import js from "@eslint/js";
import tseslint from "typescript-eslint";
import shardctl from "./eslint/boundaries.js";

export default tseslint.config(
  // src/engine/kernels/assembly is AssemblyScript (compiled by asc, not tsc): its decorators and
  // types are not TypeScript's.
  { ignores: ["dist/", "node_modules/", "coverage/", ".demo/", "**/*.js", "!eslint.config.js", "!eslint/*.js", "src/engine/kernels/assembly/"] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      "@typescript-eslint/no-explicit-any": "error",
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
    },
  },
  {
    // Folder boundaries (eslint/boundaries.js): src/engine stays independent of the control plane,
    // and concerns import each other only through src/<concern>/index.js.
    files: ["src/**/*.ts"],
    plugins: { shardctl },
    rules: { "shardctl/boundaries": "error" },
  },
);
