/** `shardctl router --config <router.yaml>`: serve the embedded OpenAI-compatible router until a signal. */
import { parseArgs } from "node:util";
import { startRouter } from "../../router/index.js";
import { waitForSignal } from "./daemon.js";
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
  let port: number | undefined;
  if (values.port !== undefined) {
    if (!/^\d{1,5}$/.test(values.port) || Number(values.port) > 65535) {
      throw new UsageError(`expected --port to be an integer from 0 to 65535, got "${values.port}"`);
    }
    port = Number(values.port);
  }

  const idle = values["upstream-idle-seconds"];
  if (idle !== undefined && !(/^\d{1,5}$/.test(idle) && Number(idle) >= 1 && Number(idle) <= 86400)) {
    throw new UsageError(`expected --upstream-idle-seconds to be an integer from 1 to 86400, got "${idle}"`);
  }

  // Listen for signals before starting: a SIGTERM right after the "listening" line (a service
  // manager stopping it at once) must close the router, not kill it by the default action.
  const signalled = waitForSignal();
  const router = await startRouter({
    configFile: values.config,
    host: values.host,
    port,
    overrideSource: "--host/--port",
    ...(idle === undefined ? {} : { upstreamIdleMs: Number(idle) * 1000 }),
    logger: createLogger("shardctl-router", { format }),
  });
  // Serve until SIGINT/SIGTERM, then close listeners and backend connections.
  await signalled;
  await router.close();
  return 0;
}
