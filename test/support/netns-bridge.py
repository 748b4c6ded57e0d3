"""
Carries a browser's loopback connections out of its own network namespace into this machine's.

The browser runs in a namespace of its own, so that the interfaces other tests create and remove
(the fault lab's veth pairs and bridges) are not changes of its network: Chromium cancels a
navigation under way when its network changes. In that namespace, iptables redirects every TCP
connection to 127.0.0.0/8 to the port this bridge listens on there; the bridge reads where each
connection was going (SO_ORIGINAL_DST) and opens the same address and port in the root namespace,
then copies bytes both ways. To the browser, a server of this machine is at its usual address.

Usage: netns-bridge.py <namespace file> <port>. Prints "ready" once it listens; exits when its
standard input closes (the test process that started it is gone).
"""

import ctypes
import os
import socket
import struct
import sys
import threading

CLONE_NEWNET = 0x40000000
# linux/netfilter_ipv4.h: the destination a connection had before NAT redirected it.
SO_ORIGINAL_DST = 80

libc = ctypes.CDLL(None, use_errno=True)


def enter(fd: int) -> None:
    """Move this thread into the network namespace open at fd (threads started later inherit it)."""
    if libc.setns(fd, CLONE_NEWNET) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"setns: {os.strerror(errno)}")


def copy(source: socket.socket, target: socket.socket) -> None:
    """Copy until the source ends, then end the target's writing half (HTTP keeps the other)."""
    try:
        while data := source.recv(65536):
            target.sendall(data)
        target.shutdown(socket.SHUT_WR)
    except OSError:
        # One side went away: end both, which also wakes the other direction's copy.
        for s in (source, target):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def serve(client: socket.socket) -> None:
    raw = client.getsockopt(socket.SOL_IP, SO_ORIGINAL_DST, 16)
    port = struct.unpack_from("!H", raw, 2)[0]
    address = socket.inet_ntoa(raw[4:8])
    try:
        upstream = socket.create_connection((address, port))
    except OSError:
        # Refused (or unreachable) here: the browser sees its connection reset, not answered.
        client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        client.close()
        return
    back = threading.Thread(target=copy, args=(upstream, client), daemon=True)
    back.start()
    copy(client, upstream)
    back.join()
    client.close()
    upstream.close()


def quit_when_orphaned() -> None:
    sys.stdin.buffer.read()
    os._exit(0)


def main() -> None:
    namespace, port = sys.argv[1], int(sys.argv[2])
    root = os.open("/proc/self/ns/net", os.O_RDONLY)
    browser = os.open(namespace, os.O_RDONLY)
    enter(browser)
    listener = socket.create_server(("127.0.0.1", port), backlog=128)
    # Back home before any thread starts: every upstream connection is made in the root namespace.
    enter(root)
    threading.Thread(target=quit_when_orphaned, daemon=True).start()
    print("ready", flush=True)
    while True:
        client, _ = listener.accept()
        threading.Thread(target=serve, args=(client,), daemon=True).start()


main()
