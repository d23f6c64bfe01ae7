"""Who holds a port: found even while the holder opens and closes files."""

from __future__ import annotations

import os
import socket

from tvis.live import holder


def test_a_closed_fd_during_the_scan_does_not_hide_the_holder(monkeypatch):
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        port = listening.getsockname()[1]
        readlink, failed = os.readlink, []

        def racing(path):
            if f"/proc/{os.getpid()}/fd/" in str(path) and not failed:
                failed.append(path)  # the first fd looked at closes under the scan
                raise FileNotFoundError(path)
            return readlink(path)

        monkeypatch.setattr(holder.os, "readlink", racing)
        found = holder.port_holder(port)
    assert failed and found is not None and found.startswith(f"pid {os.getpid()} (")
