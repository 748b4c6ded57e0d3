import { startTimeFunction } from "../nodes/index.js";

/**
 * The sh program that runs curl on a node with its body capped and one writer per partial file.
 *
 * $1 = the file's listed size in bytes, $2 = the partial file, $3 = "new" (truncate it first) or
 * "append" (resume from its size), the rest = the curl command, which writes the body to its stdout.
 *
 * - One writer: the `head` that writes the file records its pid and start time in `$2.writer`, and a
 *   later run stops that process (TERM, KILL after 5 s) before it touches the file. A download whose
 *   SSH connection dropped keeps running on the node: sshd learns that its client is gone only when
 *   it writes to it, and curl writes nothing to the channel. A second download appending beside it
 *   would splice two copies of the body into one file. Exit 96 (naming the pid) when the earlier
 *   writer does not go within 10 s.
 * - Resume: from the file's own size once no one else writes it, not from a size the daemon saw
 *   before (the earlier writer may have added to it since); `--continue-at` is added here. A file
 *   already at its listed size is left as it is (exit 0), so the hash check decides.
 * - Cap: `head -c` stops reading one byte past the listed size, so curl's next write fails (exit 23)
 *   and the download ends there whether or not the server sent a Content-Length (curl before 8.4
 *   applies `--max-filesize` to Content-Length only).
 * - Exit status: curl's, passed out on fd 3 because a pipeline's status is head's (dash has no
 *   pipefail); 97 when the file cannot be truncated.
 *
 * Values arrive as positional parameters only. Runs under dash, bash and macOS sh.
 */
export const cappedCurlScript = `${startTimeFunction}
size=$1 out=$2 mode=$3
shift 3
writer='${startTimeFunction}
printf "%s\\n%s\\n" "$$" "$(st "$$")" >"$0.writer"
exec head -c "$1"'
if [ -r "$out.writer" ]; then
  pid=$(sed -n 1p "$out.writer") start=$(sed -n 2p "$out.writer")
  i=0
  while [ -n "$pid" ] && [ -n "$start" ] && [ "$(st "$pid")" = "$start" ]; do
    case $i in 0) kill "$pid" 2>/dev/null ;; 50) kill -s KILL "$pid" 2>/dev/null ;; 100) echo "an earlier download writing $out (pid $pid) did not stop" >&2; exit 96 ;; esac
    i=$((i + 1))
    sleep 0.1
  done
fi
if [ "$mode" = new ]; then true >"$out" || exit 97; fi
have=0
if [ -f "$out" ]; then have=$(wc -c <"$out" | tr -d ' '); fi
if [ "$have" -gt 0 ]; then
  [ "$have" -ge "$size" ] && exit 0
  set -- "$@" --continue-at "$have"
fi
rc=$({ { "$@"; echo "$?" >&3; } | sh -c "$writer" "$out" $((size - have + 1)) >>"$out"; } 3>&1)
exit "\${rc:-98}"`;

/** Where the program records the process writing `partial` (pid, then start time); removed once the file is in place. */
export function writerRecordOf(partial: string): string {
  return `${partial}.writer`;
}
