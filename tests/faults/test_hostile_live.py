"""A hostile client against the live server: oversized declarations, idle floods and
malformed shapes are refused and counted; memory stays bounded; real senders get in."""

from __future__ import annotations

import threading
import time

import pytest
from hostile_client import (
    OVERFLOWING_SHAPES,
    closed_by_peer,
    hello,
    malformed_shape,
    oversized_declaration,
    peak_rss_mb,
    report,
    start_server,
    wait_until,
)

import tvis
from tvis.live import server as server_module
from tvis.live.server import LiveServer

# Peak memory the issue allows the server under this client; the declarations alone
# would take 3 x 2 GiB if payloads were committed when declared.
RSS_BOUND_MB = 256


@pytest.fixture
def served():
    proc, port = start_server()
    yield proc, port
    proc.kill()
    proc.wait()


def test_oversized_declarations_do_not_commit_memory(served):
    proc, port = served
    socks = [oversized_declaration(port) for _ in range(3)]  # 2 GiB each
    assert wait_until(lambda: report(proc)["refused"] >= 1)
    stats = report(proc)
    assert "bytes are being received already" in stats["last"]  # the in-flight cap
    assert peak_rss_mb(proc.pid) < RSS_BOUND_MB
    for sock in socks:
        sock.close()


@pytest.mark.parametrize("shape", OVERFLOWING_SHAPES, ids=str)
def test_malformed_shape_is_refused_without_a_thread_traceback(shape):
    live = LiveServer("127.0.0.1", 0)
    live.start()
    escaped: list = []
    previous, threading.excepthook = threading.excepthook, escaped.append
    try:
        with malformed_shape(live.port, shape) as sock:
            assert closed_by_peer(sock)
        assert wait_until(lambda: live.stats.refused == 1)
        assert escaped == []
        tvis.catch(1, name="after", server=live.address)
        assert wait_until(lambda: live.store.entries("after") != [])
    finally:
        threading.excepthook = previous
        live.stop()


def test_idle_flood_does_not_lock_out_a_real_sender(served):
    proc, port = served
    idle = [hello(port) for _ in range(server_module.MAX_CONNECTIONS)]
    assert wait_until(lambda: report(proc)["connected"] == server_module.MAX_CONNECTIONS)
    time.sleep(server_module.ADMIT_IDLE * 1.5)  # the flood has gone quiet
    tvis.catch(7, name="real", server=f"127.0.0.1:{port}")
    assert wait_until(lambda: report(proc)["real"] == 1, timeout=30)
    assert report(proc)["connected"] <= server_module.MAX_CONNECTIONS
    assert peak_rss_mb(proc.pid) < RSS_BOUND_MB
    for sock in idle:
        sock.close()


def test_silent_sender_is_dropped_after_the_idle_timeout(monkeypatch):
    monkeypatch.setattr(server_module, "IDLE_TIMEOUT", 0.3)
    live = LiveServer("127.0.0.1", 0)
    live.start()
    try:
        with hello(live.port) as sock:
            assert closed_by_peer(sock, timeout=10)
        tvis.catch(2, name="later", server=live.address)
        assert wait_until(lambda: live.store.entries("later") != [])
    finally:
        live.stop()


def test_sender_stalled_mid_frame_is_dropped_after_the_frame_timeout(monkeypatch):
    monkeypatch.setattr(server_module, "FRAME_TIMEOUT", 0.3)
    live = LiveServer("127.0.0.1", 0)
    live.start()
    try:
        with oversized_declaration(live.port, 2**20) as sock:
            assert closed_by_peer(sock, timeout=10)
        assert live.connected == 0
    finally:
        live.stop()
