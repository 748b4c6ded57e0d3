/** `shardctl router --config <router.yaml>`: serve the embedded OpenAI-compatible router until a signal. */
import { parseArgs } from "node:util";
import { startRouter } from "../../router/index.js";
import { UsageError } from "../usage-error.js";

export const summary = "serve a continuum-router YAML config with the embedded OpenAI-compatible router";

const usage = `usage: shardctl router --config <router.yaml> [--host H] [--port P]
  Listens on the config's server.bind_address (default 127.0.0.1:8080) unless --host/--port say otherwise,
  and reloads the config when the file changes. Logs are JSON on stderr. Stops on SIGINT or SIGTERM.`;

export async function run(args: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: {
      config: { type: "string", short: "c" },
      host: { type: "string" },
      port: { type: "string", short: "p" },
      help: { type: "boolean", short: "h" },
    },
  });
  if (values.help) {
    console.log(usage);
    return 0;
  }
  if (positionals.length > 0) throw new UsageError(`unexpected argument "${positionals[0]}"\n${usage}`);
  if (values.config === undefined) throw new UsageError(`expected --config <router.yaml>\n${usage}`);
  let port: number | undefined;
  if (values.port !== undefined) {
    if (!/^\d{1,5}$/.test(values.port) || Number(values.port) > 65535) {
      throw new UsageError(`expected --port to be an integer from 0 to 65535, got "${values.port}"`);
    }
    port = Number(values.port);
  }

  const router = await startRouter({ configFile: values.config, host: values.host, port });
  // Serve until SIGINT/SIGTERM, then close listeners and backend connections.
  await new Promise<void>((done) => {
    process.once("SIGINT", () => done());
    process.once("SIGTERM", () => done());
  });
  await router.close();
  return 0;
}
