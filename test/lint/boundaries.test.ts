// The folder-boundary lint rule (eslint/boundaries.js), run through ESLint's Node API with the
// repository's own eslint.config.js on snippets given virtual paths under src/.
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { ESLint, type Linter } from "eslint";
import { describe, expect, it } from "vitest";

const repoRoot = fileURLToPath(new URL("../../", import.meta.url));
const rule = "shardctl/boundaries";

// The repository's configuration, with the rule raised to "error" whatever its current level.
const eslint = new ESLint({
  cwd: repoRoot,
  overrideConfig: [{ files: ["src/**/*.ts"], rules: { [rule]: "error" } }],
});

async function boundaryMessages(file: string, code: string): Promise<Linter.LintMessage[]> {
  const [result] = await eslint.lintText(code, { filePath: join(repoRoot, file) });
  return (result?.messages ?? []).filter((m) => m.ruleId === rule);
}

async function expectOne(file: string, code: string, ...fragments: string[]): Promise<void> {
  const messages = await boundaryMessages(file, code);
  expect(messages, `${file}: ${code}`).toHaveLength(1);
  expect(messages[0]?.severity).toBe(2);
  for (const fragment of fragments) expect(messages[0]?.message).toContain(fragment);
}

async function expectNone(file: string, code: string): Promise<void> {
  expect(await boundaryMessages(file, code), `${file}: ${code}`).toEqual([]);
}

describe("boundaries lint rule", () => {
  it("is applied to src/**/*.ts by eslint.config.js", async () => {
    const config = (await eslint.calculateConfigForFile(join(repoRoot, "src/spec/x.ts"))) as Linter.Config;
    expect(config.rules?.[rule]).toBeDefined();
    const outside = (await eslint.calculateConfigForFile(join(repoRoot, "test/spec/x.test.ts"))) as Linter.Config;
    expect(outside.rules?.[rule]).toBeUndefined();
  });

  it("(a) reports a file in src/engine importing anything outside src/engine, in every import form", async () => {
    const file = "src/engine/model/x.ts";
    await expectOne(file, `import { messageOf } from "../../errors/index.js";\nmessageOf(1);`, "src/engine", "src/errors/index.js", "Move or copy");
    await expectOne(file, `import type { ClusterSpec } from "../../spec/types.js";\nexport type T = ClusterSpec;`, "src/spec/types.js");
    await expectOne(file, `export * from "../../planner/index.js";`, "src/planner/index.js");
    await expectOne(file, `export { messageOf } from "../../errors/index.js";`, "src/errors/index.js");
    await expectOne(file, `export const m = () => import("../../router/index.js");`, "src/router/index.js");
    await expectOne(file, `export type R = typeof import("../../router/index.js");`, "src/router/index.js");
    await expectOne(file, `import pkg from "../../../package.json" with { type: "json" };\nexport const v = pkg;`, "package.json");
    await expectOne("src/engine/x.ts", `import { run } from "../cli/shardctl.js";\nrun();`, "src/cli/shardctl.js");
  });

  it("(b) reports a control-plane file (a command too) importing src/engine, even through its face", async () => {
    await expectOne("src/router/x.ts", `import { runEngine } from "../engine/index.js";\nrunEngine();`, "Only src/cli/shard-engine.ts", "src/engine/index.js");
    // Commands too: only the engine's own program entry may import it.
    await expectOne("src/cli/commands/x.ts", `import { runEngine } from "../../engine/index.js";\nrunEngine();`, "Only src/cli/shard-engine.ts");
    await expectOne(
      "src/launch/drivers/x.ts",
      `import type { ClusterConfig } from "../../engine/config/index.js";\nexport type C = ClusterConfig;`,
      "src/engine/config/index.js",
    );
  });

  it("(c) reports deep imports across concerns and names the face to import instead", async () => {
    await expectOne(
      "src/reconciler/steps/x.ts",
      `import { parseCluster, type ClusterSpec } from "../../spec/parse-cluster.js";\nexport const p: ClusterSpec = parseCluster();`,
      "Import ../../spec/index.js (src/spec/index.ts) instead; export parseCluster, ClusterSpec there if needed",
    );
    await expectOne("src/cli/commands/x.ts", `import { makeTestModel } from "../../planner/test-model/index.js";\nmakeTestModel();`, "Import ../../planner/index.js");
    await expectOne("src/health/x.ts", `import type { LedgerEntry } from "../launch/drivers/index.js";\nexport type L = LedgerEntry;`, "Import ../launch/index.js");
    await expectOne("src/cli/shard-engine.ts", `import { runEngine } from "../engine/run-engine.js";\nrunEngine();`, "Import ../engine/index.js");
    await expectOne("src/nodes/x.ts", `export * from "../errors/shardctl-error.js";`, "Import ../errors/index.js", "export what you need there");
  });

  it("allows imports within a concern, through faces, from the engine's program entry into its face, and of packages", async () => {
    await expectNone(
      "src/engine/coordinator/x.ts",
      `import { memoryFigures } from "../stage/worker.js";\nimport type { Logger } from "../log.js";\nimport { readFileSync } from "node:fs";\nexport const a = [memoryFigures, readFileSync] as const;\nexport type L = Logger;`,
    );
    await expectNone(
      "src/reconciler/steps/x.ts",
      `import { definitionOf } from "../pass.js";\nimport { findClusterFiles } from "../../spec/index.js";\nexport const a = [definitionOf, findClusterFiles];`,
    );
    await expectNone(
      "src/nodes/ssh/x.ts",
      `import { ShardctlError } from "../../errors/index.js";\nimport { quoteArg } from "../quote.js";\nimport { Client } from "ssh2";\nexport const a = [ShardctlError, quoteArg, Client];`,
    );
    await expectNone(
      "src/cli/shard-engine.ts",
      `import { runEngine } from "../engine/index.js";\nimport { UsageError } from "./usage-error.js";\nexport const a = [runEngine, UsageError];`,
    );
    await expectNone(
      "src/cli/commands/x.ts",
      `import { formatBytes } from "../../planner/index.js";\nimport { UsageError } from "../usage-error.js";\nexport const a = [formatBytes, UsageError];`,
    );
    await expectNone("src/launch/x.ts", `export { describeDriver } from "./drivers/index.js";`);
  });

  it("leaves files outside src alone: tests and benches may import internals", async () => {
    const [result] = await eslint.lintText(`import { StageWorker } from "../../src/engine/stage/worker.js";\nexport const a = StageWorker;`, {
      filePath: join(repoRoot, "test/engine/x.test.ts"),
    });
    expect(result?.messages.filter((m) => m.ruleId === rule)).toEqual([]);
  });
});
