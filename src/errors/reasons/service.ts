/** Reasons of installing the daemon as a service of the platform's service manager (src/service). */
export type ServiceReason =
  /** No service manager kind is known for this operating system; `--platform` names one (terminal). */
  | "ServicePlatformUnsupported"
  /** A value (a path, a user name) cannot be written into the unit or plist so that it reads back the same (terminal). */
  | "ServiceValueUnsupported"
  /** A file at the service's path was not written by shardctl; it is kept unless `--force` is given (terminal). */
  | "ServiceFileForeign"
  /** The user the system service is to run as does not exist on this machine (terminal). */
  | "ServiceUserUnknown"
  /** systemctl or launchctl refused a command; its output is in the message (transient). */
  | "ServiceManagerFailed";
