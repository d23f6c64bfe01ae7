"""The server refuses what breaks the format, its bounds or its token, and keeps serving."""

from __future__ import annotations

import socket

import msgpack
import pytest
from live_support import closed_by_peer, connect, wait_until

import tvis
from tvis.live import server as server_module
from tvis.live import wire
from tvis.live.server import LiveServer

GOOD = {
    "kind": "scalar",
    "dtype": "int",
    "value": 1,
    "name": "x",
    "seq": 1,
    "time": 0.0,
    "sender": {"host": "h", "pid": 1, "rank": None},
    "dropped": 0,
}


def still_serves(live: LiveServer, name: str) -> bool:
    """Whether a fresh catch still arrives after whatever the test did."""
    tvis.catch(1, name=name, server=live.address)
    return wait_until(lambda: live.store.entries(name) != [])


def frame(header: dict, payload: bytes = b"") -> bytes:
    return wire.pack(header, len(payload)) + payload


@pytest.mark.parametrize(
    "data",
    [
        b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
        wire.HEADER_LEN.pack(10**6) + b"x" * 100,
        wire.HEADER_LEN.pack(3) + b"\xc1\xc1\xc1" + wire.PAYLOAD_LEN.pack(0),
        frame({"hello": 1}, b"extra"),
    ],
    ids=["http", "huge-header-length", "not-msgpack", "hello-with-payload"],
)
def test_garbage_instead_of_hello_is_dropped_and_serving_goes_on(server, data):
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.sendall(data)
        assert closed_by_peer(sock)
    assert server.stats.refused == 1
    assert still_serves(server, "after")


def test_silent_connection_is_dropped_after_the_hello_timeout(server, monkeypatch):
    monkeypatch.setattr(server_module, "HELLO_TIMEOUT", 0.2)
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        assert closed_by_peer(sock, timeout=5)
    assert still_serves(server, "after")


def test_other_protocol_version_gets_a_sentence_and_is_dropped(server):
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.sendall(wire.pack({"hello": 99}))
        reply, _ = wire.read_frame(sock)
        assert reply["ok"] is False and "same tvis version" in reply["error"]
        assert closed_by_peer(sock)


@pytest.mark.parametrize(
    "data",
    [
        wire.HEADER_LEN.pack(wire.MAX_HEADER + 1),
        wire.pack({**GOOD}, 10**6),
        wire.HEADER_LEN.pack(1) + msgpack.packb([1]) + wire.PAYLOAD_LEN.pack(0),
        frame({**GOOD, "name": ""}),
        frame({**GOOD, "name": 5}),
        frame({**GOOD, "seq": -1}),
        frame({**GOOD, "time": "now"}),
        frame({**GOOD, "sender": "me"}),
        frame({**GOOD, "kind": "tensor", "dtype": "float32", "shape": [4]}, b"\0" * 8),
        frame({**GOOD, "kind": "tensor", "dtype": "object", "shape": [1]}, b"\0" * 8),
        frame(GOOD, b"trailing"),
    ],
    ids=[
        "header-over-bound",
        "payload-over-bound",
        "header-not-a-map",
        "empty-name",
        "name-not-a-string",
        "negative-seq",
        "time-not-a-float",
        "sender-not-a-map",
        "shape-beyond-payload",
        "dtype-not-allowed",
        "payload-beyond-value",
    ],
)
def test_malformed_or_oversized_frame_drops_only_that_connection(data):
    live = LiveServer("127.0.0.1", 0, max_payload=1024)
    live.start()
    try:
        with connect(live.address) as sock:
            sock.sendall(frame(GOOD))
            sock.sendall(data)
            assert closed_by_peer(sock)
        assert [e.value for e in live.store.entries("x")] == [1]
        assert live.stats.refused == 1
        assert still_serves(live, "after")
    finally:
        live.stop()


def test_wrong_or_missing_token_is_refused_and_serving_goes_on():
    live = LiveServer("127.0.0.1", 0, token="right")
    live.start()
    try:
        for token in ("wrong", None):
            with socket.create_connection(("127.0.0.1", live.port)) as sock:
                sock.sendall(wire.pack({"hello": wire.PROTOCOL, "token": token}))
                reply, _ = wire.read_frame(sock)
                assert reply == {
                    "ok": False,
                    "error": "wrong or missing token; send to TOKEN@HOST:PORT",
                }
                assert closed_by_peer(sock)
        assert live.stats.refused == 2
        with connect(live.address, token="right") as sock:
            sock.sendall(frame(GOOD))
            assert wait_until(lambda: live.store.entries("x") != [])
    finally:
        live.stop()


def test_binding_beyond_loopback_without_a_token_is_refused():
    with pytest.raises(ValueError, match="pass token="):
        LiveServer("0.0.0.0", 0)


def test_binding_beyond_loopback_with_a_token_serves():
    live = LiveServer("0.0.0.0", 0, token="t")
    live.start()
    try:
        tvis.catch(1, name="remote", server=f"t@127.0.0.1:{live.port}")
        assert wait_until(lambda: live.store.entries("remote") != [])
    finally:
        live.stop()


def test_history_is_bounded_by_count_keeping_the_newest():
    live = LiveServer("127.0.0.1", 0, history=3)
    live.start()
    try:
        for step in range(10):
            tvis.catch(step, name="s", server=live.address)
        assert wait_until(lambda: live.store.info("s") and live.store.info("s").received == 10)
        assert [e.value for e in live.store.entries("s")] == [7, 8, 9]
    finally:
        live.stop()


def test_history_is_bounded_by_bytes_but_keeps_the_newest_entry():
    import torch

    live = LiveServer("127.0.0.1", 0, max_bytes=1000)
    live.start()
    try:
        for step in range(5):
            tvis.catch(torch.full((100,), float(step)), name="w", server=live.address)
        tvis.catch(torch.zeros(1000), name="big", server=live.address)
        assert wait_until(lambda: live.store.entries("big") != [])
        assert wait_until(lambda: live.store.info("w").received == 5)
        kept = live.store.entries("w")
        assert [int(e.value.data[0]) for e in kept] == [3, 4]
        assert live.store.info("w").bytes == 800
        assert len(live.store.entries("big")) == 1
    finally:
        live.stop()


def test_a_value_too_wide_to_describe_arrives_as_a_note(server):
    tvis.catch(list(range(20_000)), name="wide", server=server.address)
    assert wait_until(lambda: server.store.entries("wide") != [])
    (entry,) = server.store.entries("wide")
    assert entry.value == f"<not sent: its description exceeds {wire.MAX_HEADER} bytes>"
    assert server.stats.refused == 0


def test_evicted_memory_is_received_into_again_only_when_nobody_holds_it():
    import torch

    from tvis.live.session import to_session

    live = LiveServer("127.0.0.1", 0, history=1)
    live.start()
    try:
        pointers = []
        held = None
        for step in range(1, 6):
            tvis.catch(torch.full((512, 1024), float(step)), name="w", server=live.address)
            assert wait_until(
                lambda s=step: len(live.store.names()) and live.store.info("w").received == s
            )
            (entry,) = live.store.entries("w")
            pointers.append(entry.payload.ctypes.data)
            if step == 1:
                held = to_session(entry.value)  # what tvis.get hands a session
            del entry
        # The held tensor's memory was never received into again; the others' was.
        assert torch.equal(held, torch.full((512, 1024), 1.0))
        assert pointers[0] not in pointers[1:]
        assert pointers[3] in pointers[1:3] and pointers[4] in pointers[1:4]
    finally:
        live.stop()
