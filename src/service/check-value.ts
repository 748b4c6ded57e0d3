import { ShardctlError } from "../errors/index.js";

/**
 * Refuses a value that no unit or plist line can carry: a control character (a newline would end
 * the line and start a directive of its own; XML 1.0 forbids most of the rest). Every value that
 * reaches a service file passes here first.
 */
export function checkServiceValue(what: string, value: string): string {
  if (hasControlCharacter(value)) {
    throw new ShardctlError(
      "ServiceValueUnsupported",
      `${what} ${JSON.stringify(value)} contains a control character: a service file cannot carry it; use a path without one`,
      {
        terminal: true,
      },
    );
  }
  return value;
}

/** True when `value` holds a C0 control character (NUL to US, tab and newline included) or DEL. */
export function hasControlCharacter(value: string): boolean {
  for (let i = 0; i < value.length; i++) {
    const code = value.charCodeAt(i);
    if (code < 0x20 || code === 0x7f) return true;
  }
  return false;
}

/** User names systemd's User= and launchd's UserName accept alike. */
const userNamePattern = /^[A-Za-z_][A-Za-z0-9_.-]{0,31}$/;

export function checkUserName(value: string): string {
  if (!userNamePattern.test(value)) {
    throw new ShardctlError("ServiceValueUnsupported", `--run-as ${JSON.stringify(value)} is not a user name (letters, digits, '_', '.', '-'; at most 32)`, {
      terminal: true,
    });
  }
  return value;
}
