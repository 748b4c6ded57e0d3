/**
 * The POSIX sh programs run on nodes. Values always arrive as positional parameters ("$1"…), never
 * spliced into the text, so the one quoting function (quote.ts) is the only path from a value to a
 * shell. They run under dash, bash and macOS sh alike.
 */

// Kernel start time of pid $1: Linux /proc/<pid>/stat field 22 (clock ticks since boot; zombies count
// as gone), elsewhere the `ps -o lstart=` text, in the C locale: the text is compared with the one
// recorded at launch, and a session in another language would write the date in other words.
// Prints nothing when there is no such process. The shell's own `read` takes the line: liveness
// probes run it for every process of every cluster, and a `cat` forked each time was a cost.
export const startTimeFunction = `st() {
  if [ -r "/proc/$1/stat" ]; then
    IFS= read -r s 2>/dev/null <"/proc/$1/stat" || return 0
    s=\${s##*") "}
    set -- $s
    [ "$1" = Z ] || echo "linux:\${20}"
  elif [ ! -d /proc/self ]; then
    t=$(LC_ALL=C ps -o lstart= -p "$1" 2>/dev/null) && [ -n "$t" ] && echo "$t"
  fi
  return 0
}`;

/** $1 = pid → its start time (empty when gone). */
export const startTimeScript = `${startTimeFunction}
st "$1"`;

/**
 * $1 = cwd, $2 = log file, rest = argv. Starts argv in its own session (setsid, or perl's POSIX::setsid
 * where util-linux is absent) with output appended to the log, prints "<pid> <start time>".
 *
 * The process notes its own start time (in `<log>.start`) before it becomes argv, keeping its pid:
 * one that ends at once (an engine that puts itself in the background and exits 0) is a zombie, or
 * already reaped, when this script asks /proc, which then gives nothing, and the start read from the
 * note instead (at most 2 s later) tells it from a later process given the same pid. The note stays
 * beside the log (the process may write it after this script has read /proc) until the next start.
 */
export const startDetachedScript = `${startTimeFunction}
cd "$1" || exit 97
log=$2
shift 2
if command -v setsid >/dev/null 2>&1; then set -- setsid "$@"
else set -- perl -MPOSIX -e 'POSIX::setsid(); exec @ARGV or exit 127' "$@"; fi
rm -f "$log.start"
sh -c '${startTimeFunction}
st $$ >"$0.start"; exec "$@"' "$log" "$@" >>"$log" 2>&1 </dev/null &
pid=$!
t=$(st "$pid")
i=0
while [ -z "$t" ] && [ "$i" -lt 40 ]; do
  if [ -s "$log.start" ]; then t=$(cat "$log.start"); else sleep 0.05 2>/dev/null || sleep 1; fi
  i=$((i + 1))
done
echo "$pid $t"`;

/**
 * `memory_cgroup`: sets mp to this shell's memory cgroup's path in its hierarchy ("" off Linux),
 * mb to where that hierarchy is mounted and mv to its version: cgroup v1's memory controller when
 * it is mounted, else v2's unified tree.
 */
const memoryCgroupFunction = `memory_cgroup() {
  mp=$(awk -F: '$2 ~ /(^|,)memory(,|$)/ {sub(/^[^:]*:[^:]*:/, ""); print; exit}' /proc/self/cgroup 2>/dev/null)
  if [ -n "$mp" ] && [ -d /sys/fs/cgroup/memory ]; then mb=/sys/fs/cgroup/memory mv=1
  else mp=$(awk -F: '$1 == "0" && $2 == "" {sub(/^0::/, ""); print; exit}' /proc/self/cgroup 2>/dev/null); mb=/sys/fs/cgroup mv=2; fi
}`;

/**
 * Wraps a command so its exit status lands in a file ($0). The trap is a handler, not an ignore, so the
 * command itself still gets default signal dispositions; the shell records the status after it ends.
 * It is set only as the command starts: a stop that comes while the shell still reads the counts
 * below ends the shell there, instead of being absorbed and followed by a command that then runs
 * until the stop's SIGKILL.
 * On Linux it also reads a count of OOM kills as the command starts and as it ends: its memory
 * cgroup's (v1 `memory.oom_control`, v2 `memory.events`: processes of that cgroup the OOM killer
 * ended, whichever limit ran out), else the whole system's (/proc/vmstat). When the count rose
 * meanwhile, "<cgroup|system> <before> <after>" goes to "$0.oom", before the status: a command
 * killed by SIGKILL then was most likely the process the OOM killer chose.
 */
export const exitStatusWrapper = `${memoryCgroupFunction}
shardctl_oom_kills() {
  memory_cgroup
  if [ "$mv" = 1 ]; then f=$mb\${mp%/}/memory.oom_control; else f=$mb\${mp%/}/memory.events; fi
  if [ -n "$mp" ] && [ -r "$f" ]; then echo "cgroup $(sed -n 's/^oom_kill //p' "$f")"; return; fi
  k=$(sed -n 's/^oom_kill //p' /proc/vmstat 2>/dev/null)
  [ -z "$k" ] || echo "system $k"
}
b=$(shardctl_oom_kills)
trap : TERM INT HUP
"$@"
s=$?
a=$(shardctl_oom_kills)
[ -n "$b" ] && [ "$a" != "$b" ] && echo "$b \${a#* }" > "$0.oom"
echo $s > "$0"`;

/** The file beside an exit status file where the wrapper notes OOM kills while its command ran. */
export function oomNoteOf(exitFile: string): string {
  return `${exitFile}.oom`;
}

/**
 * $1 = pid, $2 = expected start time, $3 = signal name. Exit 3 when the start time differs. A
 * stopped process (SIGSTOP, a debugger) acts on TERM, INT or HUP only once continued, so those are
 * followed by CONT: a stopped stage then stops within the grace period instead of waiting for KILL.
 */
export const signalScript = `${startTimeFunction}
[ "$(st "$1")" = "$2" ] || exit 3
kill -s "$3" -- "-$1" 2>/dev/null || kill -s "$3" "$1" || exit
case "$3" in TERM|INT|HUP) kill -s CONT -- "-$1" 2>/dev/null || kill -s CONT "$1" 2>/dev/null ;; esac
exit 0`;

/**
 * $1 = pid, $2 = start time. Returns when the process is gone (gone, a zombie, or another start
 * time). Writes a byte each second so that when the watcher's channel is closed, the next write
 * fails and the watch ends instead of lingering.
 *
 * A daemon watches every stage of every cluster all the time, so the wait must cost an idle node
 * nothing: where GNU tail runs, \`tail --pid\` waits for the pid with kill(2) every 0.1 s, forking
 * nothing, and a keep-alive forks one \`sleep 1\` a second (a check that forked \`sleep 0.1\` ten times
 * a second cost about 1 % of a core per process watched). Elsewhere (BSD and BusyBox tails have no
 * --pid) the shell's own loop checks every 0.1 s. On Linux the check is the shell's own \`read\` of
 * /proc/<pid>/stat (as st() reads it), with nothing forked. After tail, the loop confirms: a pid
 * recycled by another process, or a zombie, is gone all the same. The keep-alive ignores SIGPIPE so
 * that its failed write ends the tail rather than only itself (the shell waits on the tail), and
 * checks the pid each second too: tail takes a zombie for alive, and one whose parent never reaps
 * it (a container's PID 1 that is no init) would hold the watch for ever.
 */
export const watchExitScript = `${startTimeFunction}
pid=$1 want=$2 i=0
alive() {
  if [ -d /proc/self ]; then
    IFS= read -r s 2>/dev/null <"/proc/$pid/stat" || return 1
    s=\${s##*") "}
    set -- $s
    [ "$1" != Z ] && [ "linux:\${20}" = "$want" ]
  else
    [ "$(st "$pid")" = "$want" ]
  fi
}
alive || exit 0
case $(tail --version 2>/dev/null) in
*GNU*)
  tail --pid="$pid" -s 0.1 -f /dev/null >/dev/null 2>&1 </dev/null &
  t=$!
  ( trap '' PIPE; while sleep 1; do { printf . && alive; } || { kill "$t" 2>/dev/null; exit 0; }; done ) &
  k=$!
  wait "$t"
  kill "$k" 2>/dev/null
  ;;
esac
while alive; do
  sleep 0.1
  i=$((i + 1))
  if [ $((i % 10)) -eq 0 ]; then printf . || exit 0; fi
done`;

/**
 * Each argument: "<size> <mtime> <ctime> <inode> <type>" following symlinks (times in seconds with
 * nanosecond fractions), "-" when missing, or "! <the system's words>" when it cannot be looked at
 * (an I/O error of a failing disk, a network mount refusing it): not taken for a missing file,
 * which staging would fetch again whole.
 */
export const statScript = `if stat -c %s / >/dev/null 2>&1; then set -- -c '%s %.9Y %.9Z %i %F' "$@"; else set -- -f '%z %Fm %Fc %i %HT' "$@"; fi
how=$1 format=$2
shift 2
for f in "$@"; do
  if o=$(LC_ALL=C stat -L "$how" "$format" -- "$f" 2>&1); then echo "$o"
  else case $o in *"No such file or directory"*|*"Not a directory"*) echo - ;; *) echo "! \${o##*: }" ;; esac; fi
done`;

/** $1 = path → "<sha256>  <path>". */
export const sha256Script = `if command -v sha256sum >/dev/null 2>&1; then exec sha256sum -- "$1"; else exec shasum -a 256 -- "$1"; fi`;

/**
 * `free_kib <dir>`: the KiB free, as `df -Pk` tells the node's user, where `dir` is or would be (its
 * nearest existing ancestor); nothing when df cannot say.
 */
export const freeKiBFunction = `free_kib() {
  d=$1
  while [ ! -e "$d" ]; do d=$(dirname "$d"); done
  df -Pk "$d" | awk 'NR==2{print $4}'
}`;

/**
 * `cgroup_memory`: a "cgroupMem=<limit> <usage> <file cache>" line (bytes) for each memory cgroup
 * from this shell's own up to the root that has a limit file (cgroup v1's memory controller when
 * mounted, else v2's unified tree); nothing off Linux. Processes a later SSH session starts share
 * those ancestors (a container's, a user slice's limit), so their memory is capped as this shell's is.
 */
export const cgroupMemoryFunction = `${memoryCgroupFunction}
cgroup_memory() {
  [ -r /proc/self/cgroup ] || return 0
  memory_cgroup
  p=$mp
  if [ "$mv" = 1 ]; then l=memory.limit_in_bytes u=memory.usage_in_bytes c=total_cache; else l=memory.max u=memory.current c=file; fi
  while [ -n "$p" ]; do
    d=$mb\${p%/}
    if [ -r "$d/$l" ]; then
      echo "cgroupMem=$(cat "$d/$l" 2>/dev/null) $(cat "$d/$u" 2>/dev/null) $(awk -v k="$c" '$1 == k {print $2}' "$d/memory.stat" 2>/dev/null)"
    fi
    [ "$p" = / ] && break
    p=$(dirname "$p")
  done
}`;

/**
 * $1 = model dir, $2 = engine binary (may be empty). key=value lines: os, arch, memory (Linux
 * /proc/meminfo in kB, and the limits of the shell's memory cgroups; macOS sysctl hw.memsize and
 * vm_stat pages), cuda, free disk at the nearest existing ancestor of the model dir (kB), engine
 * version (first line of --version). `at=disk` and `at=engine` mark the step begun, so that a probe
 * cut short by its deadline (a model dir on a frozen mount, an engine that never answers) keeps what
 * the finished steps found and says where it stopped.
 */
export const probeScript = `${freeKiBFunction}
${cgroupMemoryFunction}
echo "os=$(uname -s)"
echo "arch=$(uname -m)"
if [ -r /proc/meminfo ]; then
  awk '/^MemTotal:/{print "memTotalKb=" $2} /^MemAvailable:/{print "memAvailKb=" $2}' /proc/meminfo
  cgroup_memory
else
  echo "memTotalBytes=$(sysctl -n hw.memsize 2>/dev/null)"
  vm_stat 2>/dev/null | awk '/page size of/{ps=$8} /Pages free/{f=$3} /Pages inactive/{i=$3} /Pages speculative/{s=$3} END{if (ps) printf "memAvailBytes=%.0f\\n", (f+i+s)*ps}'
fi
if command -v nvidia-smi >/dev/null 2>&1; then echo cuda=1; fi
echo at=disk
k=$(free_kib "$1")
[ -z "$k" ] || echo "diskFreeKb=$k"
echo at=engine
if [ -n "$2" ]; then
  if v=$("$2" --version 2>&1); then echo "engine=$(printf '%s\\n' "$v" | head -n 1 | cut -c 1-256)"
  else command -v "$2" >/dev/null 2>&1 || echo "engineMissing=1"; echo "engineError=$(printf '%s\\n' "$v" | head -n 1 | cut -c 1-256)"; fi
fi`;
