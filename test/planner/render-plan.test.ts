import { describe, expect, it } from "vitest";
import { formatBytes, planShards, renderFitBar, renderPlanMarkdown, renderPlanText, type PlanNode } from "../../src/planner/index.js";
import { syntheticProfile } from "./synthetic-profile.js";

const GiB = 1024 ** 3;
const profile = syntheticProfile({ layerBytes: new Array<number>(16).fill(GiB) });
const nodes: PlanNode[] = [
  { name: "studio-1", memoryBytes: 16 * GiB },
  { name: "studio-2", memoryBytes: 16 * GiB },
];

describe("formatBytes", () => {
  it.each([
    [0, "0 B"],
    [512, "512 B"],
    [1536, "1.5 KiB"],
    [1024 * 1024 - 1, "1.0 MiB"],
    [62.3 * GiB, "62.3 GiB"],
    [810 * GiB, "810.0 GiB"],
    [2.5 * 1024 * GiB, "2.5 TiB"],
    [-3 * GiB, "-3.0 GiB"],
  ])("%d → %s", (bytes, text) => {
    expect(formatBytes(bytes)).toBe(text);
  });
});

describe("renderFitBar", () => {
  it("fills in tenths and prints the percentage", () => {
    expect(renderFitBar(0.62)).toBe("[██████░░░░]  62%");
    expect(renderFitBar(1.37)).toBe("[██████████] 137%");
    expect(renderFitBar(null)).toBe("[??????????]   ?");
  });
});

describe("renderPlanText", () => {
  it("one row per stage with node, half-open range, weights, KV, budget and a fit bar; then the verdict", () => {
    const text = renderPlanText(planShards(profile, nodes, { strategy: "equal", engine: "mlxcel", contextLength: 4096 }));
    const lines = text.trimEnd().split("\n");
    expect(lines[1]).toMatch(/^STAGE\s+NODE\s+LAYERS\s+WEIGHTS\s+KV\s+TOTAL\s+BUDGET\s+SOURCE\s+FIT$/);
    expect(lines[2]).toMatch(/^0\s+studio-1\s+\[0, 8\)\s+8\.0 GiB\s+4\.0 MiB\s+8\.0 GiB\s+13\.3 GiB\s+declared\s+\[██████░░░░\]\s+60%$/);
    expect(lines[3]).toMatch(/^1\s+studio-2\s+\[8, 16\)/);
    expect(lines.at(-1)).toBe("plan: feasible");
    expect(text).not.toContain("\u001b[");
  });

  it("lists warnings and errors with their reasons, and colours only when asked", () => {
    const plan = planShards(profile, [...nodes, { name: "tiny", memoryBytes: GiB }], { strategy: "equal", engine: "mlxcel", contextLength: 4096 });
    const text = renderPlanText(plan);
    expect(text).toContain("warning MoreThanTwoStages: ");
    expect(text).toContain(`error StageDoesNotFit: stage 2 on node "tiny"`);
    expect(text.trimEnd().split("\n").at(-1)).toBe("plan: infeasible (1 error)");
    expect(renderPlanText(plan, { color: true })).toContain("\u001b[31m");
  });
});

describe("renderPlanMarkdown", () => {
  it("renders a table with a header, one row per stage and a total row, then errors", () => {
    const plan = planShards(profile, [nodes[0]!, { name: "tiny", memoryBytes: GiB }], { strategy: "equal", engine: "mlxcel", contextLength: 4096 });
    const md = renderPlanMarkdown(plan);
    // The model's own words (its source, family, messages) are in code spans: shown, never rendered.
    expect(md).toContain("### Shard plan: `synthetic` — ❌ infeasible (1 error)");
    expect(md).toContain("`llama`, 16 layers, engine `mlxcel`");
    expect(md).toContain("| Stage | Node | Layers | Weights | KV cache | Total | Budget | Budget from | Fit |");
    expect(md).toContain("| 0 | studio-1 | [0, 8) | 8.0 GiB | 4.0 MiB | 8.0 GiB | 13.3 GiB | declared | `[██████░░░░]  60%` |");
    expect(md).toContain("| | **total** | 16 layers |");
    expect(md).toContain("**Errors**");
    expect(md).toMatch(/- `StageDoesNotFit`: `stage 1 on node "tiny"/);
  });
});

describe("where each budget came from", () => {
  const plan = planShards(
    profile,
    [
      { name: "capped", memoryBytes: 16 * GiB, availableBytes: 40 * GiB },
      { name: "reported", memoryBytes: 64 * GiB, availableBytes: 30 * GiB },
      { name: "limited", memoryBytes: 64 * GiB, availableBytes: 40 * GiB, memoryLimitBytes: 20 * GiB },
    ],
    { strategy: "equal", engine: "reference", contextLength: 4096 },
  );

  it("is in the plan, per stage", () => {
    expect(plan.stages.map((s) => s.budgetSource)).toEqual(["probed-capped-by-declared", "probed", "memory-limit"]);
  });

  it("is a column of the text and Markdown tables", () => {
    const text = renderPlanText(plan).split("\n");
    expect(text[2]).toMatch(/^0\s+capped\s.*\s13\.3 GiB\s+probed, capped by declared\s+\[/);
    expect(text[3]).toMatch(/^1\s+reported\s.*\s25\.0 GiB\s+probed\s+\[/);
    expect(text[4]).toMatch(/^2\s+limited\s.*\s16\.7 GiB\s+memory_limit\s+\[/);
    const md = renderPlanMarkdown(plan);
    expect(md).toMatch(/^\| 0 \| capped \| .* \| 13\.3 GiB \| probed, capped by declared \| `/m);
    expect(md).toMatch(/^\| 2 \| limited \| .* \| 16\.7 GiB \| memory_limit \| `/m);
  });
});
