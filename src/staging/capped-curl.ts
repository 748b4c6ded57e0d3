/**
 * The sh program that runs curl on a node with its body capped: $1 = the most bytes to take, $2 = the
 * file, $3 = "new" (truncate it first) or "append", the rest = the curl command, which writes the body
 * to its stdout. `head -c` stops reading after $1 bytes, so curl's next write fails (exit 23) and the
 * download ends there whether or not the server sent a Content-Length (curl before 8.4 applies
 * `--max-filesize` to Content-Length only). The program exits with curl's status, which it passes out
 * on fd 3 because a pipeline's status is head's (dash has no pipefail). Values arrive as positional
 * parameters only. Runs under dash, bash and macOS sh.
 */
export const cappedCurlScript = `cap=$1 out=$2
if [ "$3" = new ]; then true >"$out" || exit 97; fi
shift 3
rc=$({ { "$@"; echo "$?" >&3; } | head -c "$cap" >>"$out"; } 3>&1)
exit "\${rc:-98}"`;
