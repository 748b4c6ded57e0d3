/**
 * The one way a value reaches a remote shell: POSIX single quotes, with every `'` written as `'\''`.
 * Nothing is ever interpolated into a command line any other way.
 */
export function quoteArg(value: string): string {
  if (value.includes("\0")) throw new TypeError("a shell argument cannot contain a NUL byte");
  // Bare only when no shell can read anything into it: zsh (macOS login shells) expands a leading
  // `=` to a command path, so the first character is held to a stricter set.
  if (/^[A-Za-z0-9_./-][A-Za-z0-9_@%+=:,./-]*$/.test(value)) return value;
  return `'${value.replaceAll("'", `'\\''`)}'`;
}

/** Quote an argv array into one command line for `sh -c`. */
export function quoteArgv(argv: readonly string[]): string {
  return argv.map(quoteArg).join(" ");
}

/**
 * A command line any login shell runs as `sh -c script`. sshd hands a command to the user's login
 * shell, which may be no POSIX shell: fish reads `\\` and `\'` inside single quotes as escapes. Here
 * every `'` and `\` is written outside the quotes, escaped (`'\''`, `'\\'`), which POSIX shells,
 * zsh and fish all read the same way. `exec` keeps the login shell's pid (the session's leader).
 */
export function anyShellRuns(script: string): string {
  if (script.includes("\0")) throw new TypeError("a shell argument cannot contain a NUL byte");
  const word = [...script].map((c) => (c === "'" ? `'\\''` : c === "\\" ? `'\\\\'` : c)).join("");
  return `exec sh -c '${word}'`;
}
