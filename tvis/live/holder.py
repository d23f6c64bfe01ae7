"""Who holds a TCP port: so "address already in use" can name the program to stop.

Read from Linux's /proc (the listening socket's inode, then the process with that socket
open); elsewhere, or when the holder belongs to another user, the answer is None.
"""

from __future__ import annotations

import os
from pathlib import Path

LISTEN = "0A"
"""The socket state /proc/net/tcp writes for a listening socket."""


def _listening_inodes(port: int) -> set[str]:
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if (
                len(fields) > 9
                and fields[3] == LISTEN
                and int(fields[1].rsplit(":", 1)[1], 16) == port
            ):
                inodes.add(fields[9])
    return inodes


def _link(path: str) -> str | None:
    """Where an fd points, or None once it is closed: a busy holder opens and closes fds
    while it is scanned, and one closed fd must not hide the rest of its process."""
    try:
        return os.readlink(path)
    except OSError:
        return None


def port_holder(port: int) -> str | None:
    """``"pid 1234 (tvis tui --live)"`` for the process listening on ``port``, or None."""
    inodes = _listening_inodes(port)
    if not inodes:
        return None
    wanted = {f"socket:[{inode}]" for inode in inodes}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
            if not any(_link(f"/proc/{pid}/fd/{fd}") in wanted for fd in fds):
                continue
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue  # gone, or another user's
        words = [Path(argv[0].decode(errors="replace")).name] + [
            a.decode(errors="replace") for a in argv[1:] if a
        ]
        command = " ".join(words)
        return f"pid {pid} ({command[:60]}{'…' if len(command) > 60 else ''})"
    return None
