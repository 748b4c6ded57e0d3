/** `shardctl router --config <router.yaml>`: serve the embedded OpenAI-compatible router until a signal. */
import { parseArgs } from "node:util";
import { startRouter } from "../../router/index.js";
import { waitForSignal } from "../wait-for-signal.js";
import { createLogger, logFormatOption, parseLogFormat } from "../logger.js";
import { usageOf } from "../help/index.js";
import { UsageError } from "../usage-error.js";

const usage = usageOf("router");

export async function run(args: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: {
      config: { type: "string", short: "c" },
      host: { type: "string" },
      port: { type: "string", short: "p" },
      "upstream-idle-seconds": { type: "string" },
      ...logFormatOption,
    },
  });
  if (positionals.length > 0) throw new UsageError(`unexpected argument "${positionals[0]}"\n${usage}`);
  if (values.config === undefined) throw new UsageError(`expected --config <router.yaml>\n${usage}`);
  const format = parseLogFormat(values["log-format"]);
  const port = integerFlag("--port", values.port, 0, 65535);
  const idleSeconds = integerFlag("--upstream-idle-seconds", values["upstream-idle-seconds"], 1, 86400);

  // Listen for signals before starting: a SIGTERM right after the "listening" line (a service
  // manager stopping it at once) must close the router, not kill it by the default action.
  const signalled = waitForSignal();
  const router = await startRouter({
    configFile: values.config,
    host: values.host,
    port,
    overrideSource: "--host/--port",
    ...(idleSeconds === undefined ? {} : { upstreamIdleMs: idleSeconds * 1000 }),
    logger: createLogger("shardctl-router", { format }),
  });
  // Serve until SIGINT/SIGTERM, then close listeners and backend connections.
  await signalled;
  await router.close();
  return 0;
}

/** A flag's whole number in [min, max] (at most five digits), or undefined when not given. */
function integerFlag(flag: string, value: string | undefined, min: number, max: number): number | undefined {
  if (value === undefined) return undefined;
  if (!/^\d{1,5}$/.test(value) || Number(value) < min || Number(value) > max) {
    throw new UsageError(`expected ${flag} to be an integer from ${min} to ${max}, got "${value}"`);
  }
  return Number(value);
}
