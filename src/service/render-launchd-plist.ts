import { checkUserName } from "./check-value.js";
import { daemonArguments, restartDelaySeconds, secretsNote, stopTimeoutSeconds, workingDirectoryOf } from "./daemon-command.js";
import { serviceMarker } from "./marker.js";
import type { ServiceLocation, ServiceSpec } from "./types.js";
import { escapeXml } from "./xml-escape.js";

/**
 * The launchd property list that runs `shardctl daemon` for one watched directory. launchd has no
 * environment file of its own, so node reads the operator's with `--env-file` (node ≥ 20.6): the
 * secrets stay out of the plist and survive a reinstall, which rewrites it.
 */
export function renderLaunchdPlist(location: ServiceLocation, spec: ServiceSpec): string {
  const string = (what: string, value: string): string => `<string>${escapeXml(what, value)}</string>`;
  const argv = [
    string("the node binary", spec.nodePath),
    string("the environment file", `--env-file=${location.envFile}`),
    string("shardctl.js", spec.scriptPath),
    ...daemonArguments(location, spec).map((word) => string("the daemon's argument", word)),
  ];
  const logFile = location.logFile ?? `${location.name}.log`;
  const lines = [
    '<?xml version="1.0" encoding="UTF-8"?>',
    '<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">',
    comment(`${serviceMarker}: written by \`shardctl service install\`, which rewrites this file; \`shardctl service uninstall\` removes it.`),
    comment(secretsNote(spec, "the environment file given to node")),
    '<plist version="1.0">',
    "<dict>",
    "\t<key>Label</key>",
    `\t${string("the label", location.name)}`,
    "\t<key>ProgramArguments</key>",
    "\t<array>",
    ...argv.map((line) => `\t\t${line}`),
    "\t</array>",
    "\t<key>WorkingDirectory</key>",
    `\t${string("the settings file's directory", workingDirectoryOf(spec))}`,
    "\t<key>EnvironmentVariables</key>",
    "\t<dict>",
    "\t\t<key>PATH</key>",
    `\t\t${string("the value of PATH", spec.path)}`,
    "\t</dict>",
    ...(location.domain === "system" && spec.runAs !== undefined ? ["\t<key>UserName</key>", `\t<string>${checkUserName(spec.runAs)}</string>`] : []),
    "\t<key>RunAtLoad</key>",
    "\t<true/>",
    // Restart on failure only: a daemon that exits 0 was stopped on purpose.
    "\t<key>KeepAlive</key>",
    "\t<dict>",
    "\t\t<key>SuccessfulExit</key>",
    "\t\t<false/>",
    "\t</dict>",
    "\t<key>ThrottleInterval</key>",
    `\t<integer>${restartDelaySeconds}</integer>`,
    // When the daemon exits launchd kills what is left of its process group. The stage workers lead
    // sessions of their own (setsid) and keep running; AbandonProcessGroup stays off so that helpers
    // the daemon was running (ssh clients) end with it.
    "\t<key>ExitTimeOut</key>",
    `\t<integer>${stopTimeoutSeconds}</integer>`,
    "\t<key>StandardOutPath</key>",
    `\t${string("the log file", logFile)}`,
    "\t<key>StandardErrorPath</key>",
    `\t${string("the log file", logFile)}`,
    "</dict>",
    "</plist>",
  ];
  return `${lines.join("\n")}\n`;
}

/** An XML comment; its text is ours, never a value, and must not hold "--", which would end it early. */
function comment(text: string): string {
  if (text.includes("--")) throw new Error(`an XML comment cannot contain "--": ${text}`);
  return `<!-- ${text} -->`;
}
