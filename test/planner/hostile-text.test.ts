/**
 * What a model says of itself (config.json's model_type, tensor and file names, and the messages
 * quoting them) reaches people through `shardctl plan`: on a terminal it must not act (clear the
 * screen, set the title, fake a line), and in `--markdown`, posted as a pull-request comment, it
 * must not render (a heading, a link, an image): there it stays in code spans, on its line. Run
 * `npm run build` first (the CLI cases run the built shardctl).
 */
import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { isShardctlError } from "../../src/errors/index.js";
import { codeSpan, inspectModel, makeTestModel, planShards, renderPlanMarkdown, renderPlanText, type ShardPlan } from "../../src/planner/index.js";
import { requireBuild, shardctl } from "../cli/support/run-shardctl.js";
import { layoutHeader, llamaConfig, llamaLayer, tempDir, writeConfig, writeRawSafetensors } from "./fixtures.js";
import { syntheticProfile } from "./synthetic-profile.js";

/** Every character a terminal acts on or reorders by, but the newline and the tab. */
// eslint-disable-next-line no-control-regex -- matching control characters is the point
const raw = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/;
/** Clear the screen, set the window title, paint red and fake a line; C1's CSI and a right-to-left override too. */
const terminal = "\u001b[2J\u001b]0;TITLE\u0007\u001b[31mFAKE\u009b31m\u202eevil";
/** A new line that is a heading, a link and an image, and backticks that would close a code span. */
const markdown = "llama\n## approved by security [click](https://evil.example/x) <img src=x onerror=alert(1)> `` ` ``";

const GiB = 1024 ** 3;
const nodes = [
  { name: "a", memoryBytes: 16 * GiB },
  { name: "b", memoryBytes: 16 * GiB },
];

/** A plan of a model whose model_type is `modelType`, with an error and a warning quoting `quoted`. */
function planOf(modelType: string, quoted: string): ShardPlan {
  const plan = planShards(syntheticProfile({ layerBytes: [GiB, GiB], config: { model_type: modelType } }), nodes, {
    strategy: "equal",
    engine: "mlxcel",
    contextLength: 256,
  });
  return {
    ...plan,
    errors: [...plan.errors, { reason: "ModelTensorUnexpected", message: `tensor "${quoted}" is not a tensor of the llama layout` }],
    warnings: [...plan.warnings, { reason: "SplitUnknown", message: `layers of ${quoted}` }],
  };
}

/** `line` with every code span (a run of n backticks up to the next run of exactly n) replaced by "CODE", as CommonMark reads it. */
function outsideCodeSpans(line: string): string {
  let out = "";
  let i = 0;
  while (i < line.length) {
    if (line[i] !== "`") {
      out += line[i];
      i++;
      continue;
    }
    const open = /^`+/.exec(line.slice(i))![0].length;
    const rest = line.slice(i + open);
    const close = [...rest.matchAll(/`+/g)].find((run) => run[0].length === open);
    if (close === undefined) {
      out += "`".repeat(open);
      i += open;
    } else {
      out += "CODE";
      i += open + close.index + open;
    }
  }
  return out;
}

/** No line of `md` renders any of the hostile text: each piece of it is inside a code span. */
function expectInert(md: string): void {
  expect(md).not.toMatch(raw);
  for (const line of md.split("\n")) {
    expect(line).not.toMatch(/^#+ approved/);
    expect(outsideCodeSpans(line)).not.toMatch(/<img|\]\(|evil|approved|TITLE|FAKE/);
  }
}

describe("codeSpan", () => {
  it.each([
    ["llama", "`llama`"],
    ["a`b", "``a`b``"],
    ["`x", "`` `x ``"],
    ["a``b`", "``` a``b` ```"],
    [" x", "`  x `"],
    ["x\ny\r\u2028", "`x\\u000ay\\u000d\\u2028`"],
    ["", "` `"],
    ["  ", "`  `"],
  ])("%j → %s", (text, span) => {
    expect(codeSpan(text)).toBe(span);
  });
});

describe("a safetensors header's own names in its refusal", () => {
  /** Two faked lines, a carriage return, a window title and C1's CSI. */
  const lines = "\n\nReady  True  ClusterReady\r\u001b]0;pwned\u0007\u009b31m";
  const shown = "\\n\\nReady  True  ClusterReady\\r\\u001b]0;pwned\\u0007\\u009b31m";
  const tensors = (): Parameters<typeof layoutHeader>[0] => [
    ["model.embed_tokens.weight", "F16", [16, 8]],
    ...llamaLayer(0),
    ...llamaLayer(1),
    ["model.norm.weight", "F16", [8]],
  ];

  it.each([
    ["a tensor with no dtype", (h: Record<string, unknown>) => ({ ...h, [`w${lines}`]: { shape: [0], data_offsets: [0, 0] } }), `tensor "w${shown}" has no dtype`],
    [
      "a tensor of no safetensors dtype",
      (h: Record<string, unknown>) => ({ ...h, w: { dtype: `F16${lines}`, shape: [0], data_offsets: [0, 0] } }),
      `tensor "w" has dtype "F16${shown}", which`,
    ],
    [
      "a metadata value that is not a string",
      (h: Record<string, unknown>) => ({ ...h, __metadata__: { [`format${lines}`]: 1 } }),
      `__metadata__["format${shown}"] is not a string`,
    ],
    [
      "two tensors that overlap",
      // Past the layout's tensors (1872 bytes), in the 4 bytes of data written after them.
      (h: Record<string, unknown>, end: number) => ({
        ...h,
        [`a${lines}`]: { dtype: "U8", shape: [4], data_offsets: [end, end + 4] },
        [`b${lines}`]: { dtype: "U8", shape: [2], data_offsets: [end + 2, end + 4] },
      }),
      `tensor "b${shown}" data_offsets [1874, 1876] overlap "a${shown}" [1872, 1876]`,
    ],
  ])("%s: quoted, one line, no control character", async (_, edit, quoted) => {
    const dir = await tempDir();
    await writeConfig(dir, llamaConfig());
    const { header, dataBytes } = layoutHeader(tensors());
    await writeRawSafetensors(join(dir, "model.safetensors"), edit(header, dataBytes), dataBytes + 4);
    const error = await inspectModel({ kind: "dir", path: dir }).then(
      () => undefined,
      (e: unknown) => e,
    );
    if (!isShardctlError(error)) throw new Error(`expected a ShardctlError, got ${String(error)}`);
    expect(error.reason).toBe("SafetensorsHeaderInvalid");
    expect(error.message).toContain(`${join(dir, "model.safetensors")}: ${quoted}`);
    expect(error.message).not.toMatch(raw);
    expect(error.message).not.toContain("\n");
  });
});

describe("renderPlanText", () => {
  it("shows the model's family and the messages quoting it with every control character escaped, newlines too", () => {
    const text = renderPlanText(planOf(`llama${terminal}\nplan: feasible`, `model.layers.0.${terminal}.weight`));
    expect(text).not.toMatch(raw);
    const lines = text.trimEnd().split("\n");
    expect(lines[0]).toContain("llama\\u001b[2j\\u001b]0;title\\u0007\\u001b[31mfake\\u009b31m\\u202eevil\\u000aplan: feasible, 2 layers");
    expect(text).toContain('error ModelTensorUnexpected: tensor "model.layers.0.\\u001b[2J\\u001b]0;TITLE\\u0007\\u001b[31mFAKE\\u009b31m\\u202eevil.weight"');
    expect(text).toContain("warning SplitUnknown: layers of model.layers.0.\\u001b[2J");
    // The model's newline made no line of its own: only the verdict says "plan:".
    expect(lines.filter((line) => line.startsWith("plan: "))).toEqual(["plan: infeasible (2 errors)"]);
  });
});

describe("renderPlanMarkdown", () => {
  it("keeps the model's family and the messages quoting it in code spans, on their lines", () => {
    const md = renderPlanMarkdown(planOf(markdown, `model.layers.0.${markdown}${terminal}.weight`));
    expectInert(md);
    // Its longest run of backticks is two: fenced by three, and padded where it ends with one.
    expect(md).toContain("``` llama\\u000a## approved by security [click](https://evil.example/x) <img src=x onerror=alert(1)> `` ` `` ```, 2 layers");
    expect(md).toMatch(/^- `UnvalidatedModelFamily`: ```model family "llama\\n## approved/m);
    expect(md).toMatch(/^- `ModelTensorUnexpected`: ```tensor "model\.layers\.0\.llama\\u000a## approved/m);
  });

  it("the model's source too", () => {
    const plan = planOf("llama", "x");
    expectInert(renderPlanMarkdown({ ...plan, model: { ...plan.model, source: `/models/${markdown}` } }));
  });
});

describe("shardctl plan on a model that names itself with terminal sequences and Markdown", () => {
  let dir: string;
  const config = (): string => join(dir, "shardctl.toml");
  beforeAll(async () => {
    requireBuild();
    dir = await tempDir();
    await writeFile(
      config(),
      '[nodes.a]\nhost = "10.0.0.1"\nmodel_dir = "/models"\nmemory = "4GiB"\n[nodes.b]\nhost = "10.0.0.2"\nmodel_dir = "/models"\nmemory = "4GiB"\n',
    );
    await mkdir(join(dir, "clusters"));
    // model_type: the plan's header and an UnvalidatedModelFamily error quote it.
    const family = join(dir, "family");
    await makeTestModel(family, { layers: 2 });
    await writeConfig(family, {
      ...llamaConfig({ intermediate_size: 128, hidden_size: 64, num_attention_heads: 4, num_key_value_heads: 2, vocab_size: 320 }),
      model_type: `${markdown}${terminal}`,
    });
    // A tensor name: the ModelTensorUnexpected refusal quotes it.
    const tensor = join(dir, "tensor");
    await mkdir(tensor);
    await writeConfig(tensor, llamaConfig());
    const { header, dataBytes } = layoutHeader([
      ["model.embed_tokens.weight", "F16", [16, 8]],
      ...llamaLayer(0),
      ...llamaLayer(1),
      [`model.layers.0.${markdown}${terminal}.weight`, "F16", [8]],
      ["model.norm.weight", "F16", [8]],
      ["lm_head.weight", "F16", [16, 8]],
    ]);
    await writeRawSafetensors(join(tensor, "model.safetensors"), header, dataBytes);
    for (const name of ["family", "tensor"]) {
      await writeFile(
        join(dir, "clusters", `${name}.toml`),
        `nodes = ["a", "b"]\n[model]\nid = ${JSON.stringify(join(dir, name))}\nsource = "push"\n[engine]\nkind = "mlxcel"\n`,
      );
    }
  });

  const plan = (...args: string[]): ReturnType<typeof shardctl> => shardctl(["plan", "--config", config(), "family", "tensor", ...args], { cwd: dir });

  it("plain: shows both escaped, and no model text makes a line of its own", async () => {
    const r = await plan();
    expect(r.code).toBe(1);
    expect(r.stdout + r.stderr).not.toMatch(raw);
    expect(r.stdout).toContain("\\u001b[2j\\u001b]0;title\\u0007\\u001b[31mfake\\u009b31m\\u202eevil, 2 layers");
    expect(r.stdout).toContain('tensor "model.layers.0.llama\\n## approved by security [click](https://evil.example/x) <img src=x onerror=alert(1)> `` ` ``\\u001b[2J');
    expect(r.stdout.split("\n").filter((line) => /^## approved/.test(line))).toEqual([]);
  });

  it("--markdown: every piece of model text stays in a code span on its line", async () => {
    const r = await plan("--markdown");
    expect(r.code).toBe(1);
    expectInert(r.stdout);
    expect(r.stdout).toContain("### Cluster `family`");
    expect(r.stdout).toMatch(/^- ```clusters\/tensor\.toml: ModelTensorUnexpected: .*tensor "model\.layers\.0\.llama\\n## approved/m);
  });

  it("--json: the same strings, with the controls JSON leaves raw escaped; a message quotes the tensor's name on one line", async () => {
    const r = await plan("--json");
    expect(r.stdout).not.toMatch(raw);
    const [family, tensor] = JSON.parse(r.stdout) as [{ plan: ShardPlan }, { errors: string[] }];
    expect(family.plan.model.family).toBe(`${markdown}${terminal}`.toLowerCase());
    // The message quotes the name as a JSON string: its newline and ESC are escapes, not characters.
    expect(tensor.errors[0]).toContain('tensor "model.layers.0.llama\\n## approved by security');
    expect(tensor.errors[0]).toContain('\\u001b[2J\\u001b]0;TITLE\\u0007\\u001b[31mFAKE\\u009b31m\\u202eevil.weight"');
    expect(tensor.errors[0]).not.toMatch(raw);
    expect(tensor.errors[0]).not.toContain("\n");
  });
});
