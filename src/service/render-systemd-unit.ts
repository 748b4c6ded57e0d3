import { daemonArguments, restartDelaySeconds, secretsNote, stopTimeoutSeconds, workingDirectoryOf } from "./daemon-command.js";
import { checkUserName } from "./check-value.js";
import { serviceMarker } from "./marker.js";
import { escapeSystemdLine, quoteEnvironment, quoteExecWord } from "./systemd-quote.js";
import type { ServiceLocation, ServiceSpec } from "./types.js";

/** The systemd unit that runs `shardctl daemon` for one watched directory. */
export function renderSystemdUnit(location: ServiceLocation, spec: ServiceSpec): string {
  const system = location.domain === "system";
  const execStart = [
    quoteExecWord("the node binary", spec.nodePath),
    quoteExecWord("shardctl.js", spec.scriptPath),
    ...daemonArguments(location, spec).map((word) => quoteExecWord("the daemon's argument", word)),
  ].join(" ");
  const lines = [
    `# ${serviceMarker}: written by \`shardctl service install\`, which rewrites this file; \`shardctl service uninstall\` removes it.`,
    `# Add settings with \`systemctl${system ? "" : " --user"} edit ${location.name}\`: a drop-in outlives a reinstall.`,
    "[Unit]",
    `Description=${escapeSystemdLine("the watched directory", `shardctl daemon watching ${location.dir}`)}`,
    // The daemon reaches its nodes over the network; a user manager has no network targets to wait for.
    ...(system ? ["Wants=network-online.target", "After=network-online.target"] : []),
    "",
    "[Service]",
    "Type=simple",
    ...(system && spec.runAs !== undefined ? [`User=${checkUserName(spec.runAs)}`] : []),
    `WorkingDirectory=${escapeSystemdLine("the settings file's directory", workingDirectoryOf(spec))}`,
    `ExecStart=${execStart}`,
    `# ${secretsNote(spec, "the EnvironmentFile below")}`,
    "# Its '-' lets the daemon start without it.",
    `Environment=${quoteEnvironment("PATH", spec.path)}`,
    `EnvironmentFile=-${escapeSystemdLine("the environment file", location.envFile)}`,
    "StandardOutput=journal",
    "StandardError=journal",
    `SyslogIdentifier=${location.name.replace(/\.service$/, "")}`,
    "Restart=on-failure",
    `RestartSec=${restartDelaySeconds}s`,
    "# SIGTERM reaches the daemon alone, and it leaves the clusters running. The stage workers it started on",
    "# this machine live in this unit's control group: any other KillMode would kill them with the daemon.",
    "KillMode=process",
    "KillSignal=SIGTERM",
    `TimeoutStopSec=${stopTimeoutSeconds}s`,
    "",
    "[Install]",
    `WantedBy=${system ? "multi-user.target" : "default.target"}`,
  ];
  return `${lines.join("\n")}\n`;
}
