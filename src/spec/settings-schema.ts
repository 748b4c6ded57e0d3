/**
 * The zod schema of `shardctl.toml` (settings and the node registry), as written in TOML: snake_case
 * keys, strict tables, every default here. It is the single source of truth: the JSON Schema in
 * schemas/settings.schema.json is generated from it, and `normaliseSettings` turns its output into
 * the camelCase `Settings` the rest of the program reads.
 */
import { z } from "zod";
import { allowed, patternString, patterns, quote } from "./patterns.js";
import { hostSchema } from "./host.js";
import { checkPortRange } from "./port-range.js";
import { parseSize } from "./size.js";
import { describeValue } from "./issues.js";
import { messageOf } from "../errors/index.js";

export const transportBackends = ["tcp", "thunderbolt", "rdma"] as const;
export const accelerators = ["apple-silicon", "cuda", "cpu"] as const;

/** A "first-last" port range within 1024-65535. */
export const portRangeSchema = z
  .string()
  .regex(patterns.portRange, { error: (issue) => `${quote(issue.input)} is not allowed: expected ${allowed.portRange}` })
  .superRefine((value, ctx) => {
    // A malformed string already failed the pattern above; only bounds and order are checked here.
    const problem = patterns.portRange.test(value) ? checkPortRange(value) : undefined;
    if (problem !== undefined) ctx.addIssue({ code: "custom", message: problem, input: value });
  });

/** A size string or a plain byte count, parsed to bytes. */
export const sizeSchema = z
  .union([patternString("size", 64), z.number().int().nonnegative()], {
    error: (issue) => (issue.code === "invalid_union" ? `expected ${allowed.size}, got ${describeValue(issue.input)}` : undefined),
  })
  .transform((value, ctx) => {
    if (typeof value === "number") return value;
    // A string of the size pattern can still be out of range ("9999…9GiB"): an issue at the value, like any other.
    try {
      return parseSize(value);
    } catch (error) {
      ctx.addIssue({ code: "custom", message: messageOf(error), input: value });
      return z.NEVER;
    }
  });

/** An http(s) URL. */
export const httpUrlSchema = patternString("httpUrl", 2048).refine((value) => URL.canParse(value), {
  error: (issue) => `${quote(issue.input)} is not a valid URL`,
});

const distributedSchema = z
  .object({
    enabled: z.boolean().default(false).describe("Stage and launch clusters. When false (the default) the daemon only plans and reports."),
    transport_backend: z.enum(transportBackends).default("tcp").describe("Default inter-node transport of clusters. Default tcp."),
    port_range: portRangeSchema.default("39600-39629").describe("Default transport port range, inclusive. Default 39600-39629."),
  })
  .strict();

const hubSchema = z
  .object({
    endpoint: httpUrlSchema.default("https://huggingface.co").describe("Hugging Face Hub endpoint. Default https://huggingface.co."),
    token_env: patternString("envName", 128).default("HF_TOKEN").describe("Environment variable holding the Hub token. Default HF_TOKEN."),
  })
  .strict();

const routerSchema = z
  .object({
    kind: z.enum(["continuum", "none"]).default("none").describe("Router that clusters register with. Default none."),
    config: patternString("path").optional().describe("Path of the router's YAML config (relative to this file). Required for continuum."),
    embedded: z.boolean().default(false).describe("Run shardctl's embedded router on that config. Default false."),
    admin_url: httpUrlSchema.optional().describe("Router admin API base URL, when the router is driven through it."),
    admin_token_env: patternString("envName", 128).optional().describe("Environment variable holding the admin API bearer token."),
    admin_paths: z
      .object({
        list: patternString("urlPath", 256).optional().describe("GET: the router's backends as JSON. Default /admin/backends."),
        register: patternString("urlPath", 256).optional().describe("POST: add or replace a backend (the entry as JSON). Default /admin/backends."),
        deregister: patternString("urlPath", 256).optional().describe("DELETE: remove a backend; {name} is replaced by its name. Default /admin/backends/{name}."),
      })
      .strict()
      .optional()
      .describe(
        "Paths of the admin API under admin_url. continuum-router does not document them: set the deployed version's. Defaults: /admin/backends and /admin/backends/{name}.",
      ),
    health_url: httpUrlSchema
      .optional()
      .describe(
        "Where the daemon asks, every health-monitor poll, whether the router answers (any HTTP answer counts); a router that does not makes each registered cluster's Registered Unknown and its health Degraded. Default: the embedded router's /health, else /health at admin_url's origin, else /health at router.config's server.bind_address (a wildcard address asked on loopback). Without any (port 0) the router is not watched.",
      ),
    weight: z.number().int().min(1).max(1000).default(1).describe("Default backend weight of registered clusters. Default 1."),
    upstream_idle_seconds: z
      .number()
      .int()
      .min(1)
      .max(86400)
      .default(600)
      .describe(
        "The embedded router: longest a backend may send nothing while a request waits on it (its head, or the next bytes of a streamed answer); then 504 upstream_timeout, or an error event mid-stream. Default 600 (an answer that is not streamed sends nothing until it is done).",
      ),
  })
  .strict();

const daemonSchema = z
  .object({
    resync_seconds: z.number().int().min(1).max(86400).default(30).describe("Periodic resync interval in seconds (jittered). Default 30."),
    heartbeat_seconds: z
      .number()
      .min(0.1)
      .max(600)
      .default(5)
      .describe(
        "How often the daemon touches its lock and beats on the dashboard's stream to show it runs, seconds (read at start); status, wait and the page call it silent after 4 missed beats (at least 3 s). Default 5.",
      ),
    restart_budget: z.number().int().min(0).max(100).default(3).describe("Launches per revision before a dying cluster is Stalled. Default 3."),
    restart_budget_reset_seconds: z
      .number()
      .int()
      .min(0)
      .max(31_536_000)
      .default(600)
      .describe(
        "A launch that served this long earns the restart budget back: after its death the count of launches starts again, so a cluster that fails now and then over weeks is relaunched each time, and only one failing again soon after each launch is Stalled. Seconds; 0 never gives it back. Default 600.",
      ),
    cut_off_grace_seconds: z
      .number()
      .int()
      .min(0)
      .max(86_400)
      .default(300)
      .describe(
        "How long a cluster whose nodes all stop answering the daemon (none answers its probes over SSH and the coordinator's /health is silent) is left running as it is, seconds: most likely the daemon's own network is down while the cluster serves on. Its status says DaemonCutOff meanwhile, and nothing is torn down or counted; past it, the silence is judged as a death (every node lost power, say). Not applied to a cluster with a member on the daemon's machine. 0 judges the silence at once. Default 300.",
      ),
    allow_mass_prune: z
      .boolean()
      .default(false)
      .describe("Allow tearing down every running cluster when the directory holds no definition file while two or more of its clusters run. Default false."),
    state_dir: patternString("path").default(".shardctl").describe("Directory of the ledger and other daemon state (relative to this file). Default .shardctl."),
    metrics_address: patternString("hostPort", 300).optional().describe("host:port of the Prometheus /metrics listener. Default off."),
    ui_address: patternString("hostPort", 300)
      .optional()
      .describe('host:port of the dashboard (browser view and its JSON/SSE endpoints), e.g. "127.0.0.1:8089"; port 0 picks a free one. Default off.'),
    ui_token_env: patternString("envName", 128)
      .optional()
      .describe('Environment variable holding the dashboard\'s bearer token (needed for "Reconcile now"). Required when ui_address is not a loopback address.'),
  })
  .strict();

const sshSchema = z
  .object({
    known_hosts: patternString("path").optional().describe("OpenSSH known_hosts file host keys are checked against (relative to this file). Default ~/.ssh/known_hosts."),
    config: patternString("path").optional().describe("OpenSSH client config consulted for Host aliases (relative to this file). Default ~/.ssh/config."),
  })
  .strict();

export const nodeSchema = z
  .object({
    host: hostSchema(253).describe('IP address, hostname, ssh alias, or "local" for the control machine itself.'),
    user: patternString("user", 64).optional().describe("SSH login. Default: the ssh config's or the current user."),
    port: z.number().int().min(1).max(65535).optional().describe("SSH port. Default: the ssh config's Port for the host, else 22."),
    identity_file: patternString("path").optional().describe("SSH private key on the control machine (relative to this file)."),
    host_key_policy: z.enum(["strict", "accept-new"]).default("strict").describe("SSH host key checking. Default strict."),
    model_dir: patternString("path").describe("Directory on the node where models are staged. Relative paths only for local nodes."),
    memory: sizeSchema.optional().describe('Declared total memory, e.g. "64GiB".'),
    memory_limit: sizeSchema
      .optional()
      .describe(
        'A further cap on the memory the plan gives this node, before the headroom, e.g. "48GiB". The engine is not told: mlxcel caps itself by its own MLXCEL_MEMORY_LIMIT in the node\'s environment.',
      ),
    accelerator: z.enum(accelerators).optional().describe("Declared accelerator family."),
    engine_version: patternString("version", 64).optional().describe("Declared engine version."),
  })
  .strict();

export const settingsSchema = z
  .object({
    distributed: distributedSchema.prefault({}),
    hub: hubSchema.prefault({}),
    router: routerSchema.prefault({}),
    daemon: daemonSchema.prefault({}),
    ssh: sshSchema.prefault({}),
    nodes: z.record(patternString("name", 63), nodeSchema).prefault({}).describe("The node registry: [nodes.<name>] tables."),
  })
  .strict()
  .describe("shardctl settings and node registry (shardctl.toml)");

export type SettingsInput = z.input<typeof settingsSchema>;
export type SettingsOutput = z.output<typeof settingsSchema>;
