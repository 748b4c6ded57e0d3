/**
 * Dashboard test helpers: the daemon world of test/reconciler with the dashboard turned on, a
 * Server-Sent Events reader over fetch, and the status schema's validators (ajv), whole or for the
 * plan alone. No vitest imports: bench/dashboard.ts uses them too.
 */
import { readFileSync } from "node:fs";
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { Ajv2020 } from "ajv/dist/2020.js";
import { pino } from "pino";
import { startDashboard, type Dashboard } from "../../src/dashboard/index.js";
import type { StatusFeed } from "../../src/reconciler/index.js";
import { repoRoot, type DaemonWorld } from "../reconciler/daemon-fixture.js";

/** Put `ui_address` (and `ui_token_env`) into the world's [daemon] table. */
export async function enableDashboard(world: DaemonWorld, options: { address?: string; tokenEnv?: string } = {}): Promise<void> {
  const text = await readFile(world.settingsFile, "utf8");
  const lines = [
    `ui_address = ${JSON.stringify(options.address ?? "127.0.0.1:0")}`,
    ...(options.tokenEnv === undefined ? [] : [`ui_token_env = ${JSON.stringify(options.tokenEnv)}`]),
  ];
  if (!text.includes("[daemon]\n")) throw new Error(`${world.settingsFile} has no [daemon] table`);
  await writeFile(world.settingsFile, text.replace("[daemon]\n", `[daemon]\n${lines.join("\n")}\n`));
}

/**
 * The dashboard's own server on 127.0.0.1 with no daemon behind it: the statuses are what the test
 * publishes through `feed`, the one definition is `name`, and "Reconcile now" is taken at once
 * (`onReconcile` hears it). For showing exact states (captured fixtures) to a real browser.
 */
export function startFeedDashboard(feed: StatusFeed, name: string, options: { token?: string; onReconcile?: (cluster: string) => void } = {}): Promise<Dashboard> {
  return startDashboard({
    address: "127.0.0.1:0",
    token: options.token,
    log: pino({ level: "silent" }),
    source: {
      feed,
      readStatuses: () => Promise.resolve([]),
      clusterNames: () => Promise.resolve([]),
      hasCluster: (cluster) => Promise.resolve(cluster === name),
      requestReconcile: (cluster) => (options.onReconcile?.(cluster), Promise.resolve(true)),
      previewPlan: () => Promise.reject(new Error("no plan preview without a daemon")),
    },
  });
}

export interface SseEvent {
  event: string;
  data: unknown;
}

/** One event-stream connection, its events collected as they arrive. */
export class SseReader {
  readonly events: SseEvent[] = [];
  private readonly controller = new AbortController();
  private waiters: Array<() => void> = [];
  ended = false;
  readonly done: Promise<void>;

  constructor(url: string) {
    this.done = this.read(url).finally(() => {
      this.ended = true;
      this.wake();
    });
  }

  private async read(url: string): Promise<void> {
    const response = await fetch(url, { signal: this.controller.signal, headers: { accept: "text/event-stream" } }).catch(() => undefined);
    if (response?.body == null) return;
    const decoder = new TextDecoder();
    let buffer = "";
    try {
      for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
        buffer += decoder.decode(chunk, { stream: true });
        let end: number;
        while ((end = buffer.indexOf("\n\n")) >= 0) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const event = /^event: (.*)$/m.exec(block)?.[1];
          const data = /^data: (.*)$/m.exec(block)?.[1];
          if (event !== undefined && data !== undefined) this.events.push({ event, data: JSON.parse(data) as unknown });
        }
        this.wake();
      }
    } catch {
      // aborted, or the server ended the stream
    }
  }

  private wake(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) w();
  }

  /** The first event (from index `from`) that satisfies `predicate`; throws after `timeoutMs`. */
  async waitFor(predicate: (event: SseEvent) => boolean, timeoutMs = 30_000, from = 0): Promise<SseEvent> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const found = this.events.slice(from).find(predicate);
      if (found !== undefined) return found;
      if (this.ended) throw new Error(`the stream ended without the event; got ${JSON.stringify(this.events.map((e) => e.event))}`);
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`no such event within ${timeoutMs} ms; got ${JSON.stringify(this.events.map((e) => e.event))}`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  close(): void {
    this.controller.abort();
  }
}

type Validator = ((value: unknown) => boolean) & { errors?: unknown };
let validators: { status: Validator; plan: Validator } | undefined;

/** Throws unless `value` validates against schemas/status.schema.json (`part` "plan": its plan alone). */
export function assertSchema(value: unknown, part: "status" | "plan", what: string): void {
  if (validators === undefined) {
    const schema = JSON.parse(readFileSync(join(repoRoot, "schemas/status.schema.json"), "utf8")) as { $schema: string; properties: { plan: object } };
    const ajv = new Ajv2020({ allErrors: true, strict: true });
    ajv.addFormat("date-time", /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/);
    validators = { status: ajv.compile(schema), plan: ajv.compile({ $schema: schema.$schema, ...schema.properties.plan }) };
  }
  const validate = validators[part];
  if (!validate(value)) throw new Error(`${what} does not validate against the status schema's ${part}: ${JSON.stringify(validate.errors)}`);
}
