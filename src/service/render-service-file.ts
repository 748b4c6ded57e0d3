import { renderLaunchdPlist } from "./render-launchd-plist.js";
import { renderSystemdUnit } from "./render-systemd-unit.js";
import type { ServiceLocation, ServiceSpec } from "./types.js";

/** The unit (systemd) or plist (launchd) of a service. */
export function renderServiceFile(location: ServiceLocation, spec: ServiceSpec): string {
  return location.platform === "systemd" ? renderSystemdUnit(location, spec) : renderLaunchdPlist(location, spec);
}
