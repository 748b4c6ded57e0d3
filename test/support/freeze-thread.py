"""Stop one thread of a process while its other threads run on: what a deadlock inside a computation
looks like from outside (SIGSTOP cannot do this: it stops every thread of the process).

Usage: freeze-thread.py <tid>. Seizes the thread with ptrace (PTRACE_SEIZE, then PTRACE_INTERRUPT
stops that thread alone), prints "frozen" on stdout, and keeps it stopped until this process ends
(SIGTERM or SIGINT; the thread is detached and runs on, or is already gone). Needs CAP_SYS_PTRACE
(the tests run as root).
"""

import ctypes
import signal
import sys
import time

PTRACE_SEIZE = 0x4206
PTRACE_INTERRUPT = 0x4207

libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
libc.ptrace.restype = ctypes.c_long

tid = int(sys.argv[1])
for request in (PTRACE_SEIZE, PTRACE_INTERRUPT):
    if libc.ptrace(request, tid, None, None) != 0:
        sys.exit(f"ptrace {request:#x} on {tid} failed: errno {ctypes.get_errno()}")
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
signal.signal(signal.SIGINT, lambda *_: sys.exit(0))
print("frozen", flush=True)
while True:
    time.sleep(1)
