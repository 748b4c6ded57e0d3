/** Reasons of reading the settings (src/spec). All terminal: only an edit of the file helps. */
export type SpecReason =
  /** The settings file breaks a rule; the error carries each issue with file, line and column (terminal). */
  | "InvalidSettings"
  /** The settings file does not exist (terminal). */
  | "SettingsNotFound"
  /** The settings file exists but cannot be read, e.g. for its permissions (terminal). */
  | "SettingsUnreadable"
  /** A size such as "24GiB" does not parse (terminal). */
  | "InvalidSize"
  /** A port range "first-last" is malformed or out of bounds (terminal). */
  | "InvalidPortRange";
