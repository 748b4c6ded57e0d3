// Local ESLint rule `shardctl/boundaries`: keeps the source tree's folders honest.
//
// The source tree is split into concern folders, `src/<concern>/` (spec, planner, nodes,
// staging, launch, health, router, reconciler, engine, cli, ...), each with an `index.ts`
// face. The rule resolves every relative import specifier of a file under `src/` against
// that file and reports three kinds of import:
//
//   (a) engine-outward: a file in `src/engine` importing anything outside `src/engine`.
//       shard-engine is a separate program and must stay independent of the control plane.
//   (b) engine-inward: any file outside `src/engine` but the engine's program entry
//       (`src/cli/shard-engine.ts`) importing anything in `src/engine`. The control plane
//       (commands included) drives the engine through its binary and HTTP API only.
//   (c) deep import: a file of concern `src/<a>/...` importing a file of another concern
//       `src/<b>/...` other than its face `src/<b>/index.js`. Imports within one concern,
//       its subfolders included, are free; `src/cli` goes through the faces too.
//
// Only relative specifiers ("./x.js", "../y/z.js") are resolved; package imports
// ("node:fs", "zod") are never reported. Every import form is checked: `import`, `import type`,
// `export ... from`, `export * from`, `import("...")`, `typeof import("...")` and
// `import x = require("...")`. The rule only looks at files under the source root, so
// tests and benches may import internals.
//
// Options (all optional): { srcDir: "src", engine: "engine", entry: "cli/shard-engine.ts" }
// (entry relative to srcDir); srcDir is resolved against ESLint's working directory.
import path from "node:path";

/** The concern folder ("spec", "engine", ...) of a path relative to the source root, or null. */
function concernOf(relative) {
  const parts = relative.split(path.sep);
  return parts.length > 1 ? parts[0] : null;
}

/** True when `relative` lies inside the source root. */
function insideRoot(relative) {
  return relative !== "" && !relative.startsWith("..") && !path.isAbsolute(relative);
}

/** A specifier for `target`, written relative to the directory `fromDir` ("./x.js", "../y/index.js"). */
function specifierFor(fromDir, target) {
  const relative = path.relative(fromDir, target).split(path.sep).join("/");
  return relative.startsWith(".") ? relative : `./${relative}`;
}

/** The names an import or re-export node takes from its module, for the hint in the message. */
function importedNames(node) {
  if (node.type === "ImportDeclaration") {
    const names = node.specifiers.map((s) => {
      if (s.type === "ImportDefaultSpecifier") return "default";
      if (s.type === "ImportNamespaceSpecifier") return "*";
      return s.imported.type === "Identifier" ? s.imported.name : String(s.imported.value);
    });
    if (names.length > 0 && !names.includes("*")) return names.join(", ");
  }
  if (node.type === "ExportNamedDeclaration" && node.specifiers.length > 0) {
    return node.specifiers.map((s) => (s.local.type === "Identifier" ? s.local.name : String(s.local.value))).join(", ");
  }
  return "what you need";
}

/** @type {import("eslint").Rule.RuleModule} */
export const boundaries = {
  meta: {
    type: "problem",
    docs: {
      description: "Keep src/engine independent of the control plane, and cross concern folders of src only through their index.js face",
    },
    schema: [
      {
        type: "object",
        properties: {
          srcDir: { type: "string" },
          engine: { type: "string" },
          entry: { type: "string" },
        },
        additionalProperties: false,
      },
    ],
    messages: {
      engineOutward:
        "src/{{engine}} (shard-engine) must stay independent of the control plane, but '{{specifier}}' resolves to {{target}}. " +
        "Move or copy what it needs into src/{{engine}} instead of importing it.",
      engineInward:
        "Only src/{{entry}} may use src/{{engine}} (shard-engine is a separate program), but '{{specifier}}' resolves to {{target}}. " +
        "Drive the engine through its binary or HTTP API, or move the shared code out of src/{{engine}} into a control-plane concern.",
      deepImport: "Deep import into another concern: '{{specifier}}' resolves to {{target}}. " + "Import {{face}} instead; export {{names}} there if needed.",
    },
  },

  create(context) {
    const options = context.options[0] ?? {};
    const srcRoot = path.resolve(context.cwd, options.srcDir ?? "src");
    const engine = options.engine ?? "engine";
    const entry = options.entry ?? "cli/shard-engine.ts";
    const rootName = path.relative(context.cwd, srcRoot).split(path.sep).join("/") || ".";

    const filename = path.resolve(context.cwd, context.physicalFilename ?? context.filename);
    const fromRelative = path.relative(srcRoot, filename);
    if (!insideRoot(fromRelative)) return {};
    const fromDir = path.dirname(filename);
    const fromConcern = concernOf(fromRelative);

    /** Checks one import of `node` whose module specifier is the string literal `source`. */
    function check(node, source) {
      if (!source || source.type !== "Literal" || typeof source.value !== "string") return;
      const specifier = source.value;
      if (!specifier.startsWith("./") && !specifier.startsWith("../") && specifier !== "." && specifier !== "..") return;

      const target = path.resolve(fromDir, specifier);
      const targetRelative = path.relative(srcRoot, target);
      const targetInside = insideRoot(targetRelative);
      const targetConcern = targetInside ? concernOf(targetRelative) : null;
      const shown = path.relative(context.cwd, target).split(path.sep).join("/");
      const data = { specifier, target: shown, engine, entry };

      if (fromConcern === engine) {
        if (targetConcern !== engine) context.report({ node: source, messageId: "engineOutward", data });
        return;
      }
      if (targetConcern === engine && fromRelative.split(path.sep).join("/") !== entry) {
        context.report({ node: source, messageId: "engineInward", data });
        return;
      }
      if (targetConcern === null || targetConcern === fromConcern) return;

      const face = path.join(srcRoot, targetConcern, "index.js");
      if (target === face) return;
      context.report({
        node: source,
        messageId: "deepImport",
        data: { ...data, face: `${specifierFor(fromDir, face)} (${rootName}/${targetConcern}/index.ts)`, names: importedNames(node) },
      });
    }

    return {
      ImportDeclaration: (node) => check(node, node.source),
      ExportNamedDeclaration: (node) => check(node, node.source),
      ExportAllDeclaration: (node) => check(node, node.source),
      ImportExpression: (node) => check(node, node.source),
      // typescript-eslint 8 names the specifier `source`; older versions only had `argument` (a TSLiteralType).
      TSImportType: (node) => {
        const source = node.source ?? node.argument;
        check(node, source?.type === "TSLiteralType" ? source.literal : source);
      },
      TSExternalModuleReference: (node) => check(node, node.expression),
    };
  },
};

/** The plugin object for eslint.config.js: `plugins: { shardctl: plugin }`, rule "shardctl/boundaries". */
export default { meta: { name: "shardctl-local" }, rules: { boundaries } };
