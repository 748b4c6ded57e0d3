/**
 * The one way a value reaches a remote shell: POSIX single quotes, with every `'` written as `'\''`.
 * Nothing is ever interpolated into a command line any other way.
 */
export function quoteArg(value: string): string {
  if (value.includes("\0")) throw new TypeError("a shell argument cannot contain a NUL byte");
  if (/^[A-Za-z0-9_@%+=:,./-]+$/.test(value)) return value;
  return `'${value.replaceAll("'", `'\\''`)}'`;
}

/** Quote an argv array into one command line for `sh -c`. */
export function quoteArgv(argv: readonly string[]): string {
  return argv.map(quoteArg).join(" ");
}
