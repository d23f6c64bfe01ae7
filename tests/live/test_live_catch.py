"""tvis.catch end to end: values sent from this process arrive in a real server's store."""

from __future__ import annotations

import time

import numpy as np
import pytest
import torch
from live_support import free_port, python, stalled_server, wait_until

import tvis
from tvis.live import catching, session
from tvis.live.address import parse_address
from tvis.live.sender import Sender
from tvis.live.server import LiveServer

SERVER_CHILD = """
    import time
    from tvis.live.server import LiveServer
    server = LiveServer("127.0.0.1", 0)
    server.start()
    print(server.port, flush=True)
    time.sleep(600)
"""


def received(server: LiveServer, name: str) -> list:
    return [session.to_session(e.value) for e in server.store.entries(name)]


def test_transposed_strided_parameter_and_bf16_tensors_arrive_with_their_values(server):
    layer = torch.nn.Linear(6, 4)
    sent = {
        "transposed": torch.arange(12.0).reshape(3, 4).t(),
        "strided": torch.arange(60.0).reshape(3, 4, 5)[:, ::2, 1::2],
        "parameter": layer.weight,
        "bf16": torch.randn(8, 3).to(torch.bfloat16).t(),
    }
    for name, value in sent.items():
        tvis.catch(value, name=name, server=server.address)
    assert wait_until(lambda: len(server.store.names()) == len(sent))
    for name, value in sent.items():
        (back,) = received(server, name)
        assert back.dtype == value.dtype and back.shape == value.shape
        assert torch.equal(back, value.detach())


def test_every_n_sends_the_first_and_every_nth_call(server):
    for step in range(25):
        tvis.catch(step, name="step", every=10, server=server.address)
    assert wait_until(lambda: len(server.store.entries("step")) == 3)
    entries = server.store.entries("step")
    assert [e.seq for e in entries] == [1, 11, 21]
    assert [e.value for e in entries] == [0, 10, 20]


def test_numbers_strings_arrays_and_trees_arrive(server):
    batch = {"x": torch.ones(2, 3), "ids": [np.arange(4), 7], "note": "ok"}
    tvis.catch(3.25, name="lr", server=server.address)
    tvis.catch("epoch 2 started", name="msg", server=server.address)
    tvis.catch(batch, name="batch", server=server.address)
    assert wait_until(lambda: len(server.store.names()) == 3)
    assert received(server, "lr") == [3.25]
    assert received(server, "msg") == ["epoch 2 started"]
    (back,) = received(server, "batch")
    assert torch.equal(back["x"], batch["x"])
    np.testing.assert_array_equal(back["ids"][0], np.arange(4))
    assert back["ids"][1] == 7 and back["note"] == "ok"


def test_sender_identity_rides_with_every_catch(server, monkeypatch):
    monkeypatch.setenv("RANK", "3")
    sender = Sender(parse_address(server.address))
    sender.put("x", 1, 1.0, 0)
    assert wait_until(lambda: server.store.entries("x"))
    (entry,) = server.store.entries("x")
    assert entry.sender["rank"] == 3 and isinstance(entry.sender["pid"], int)


def test_server_from_environment_variable_is_used(server, monkeypatch):
    monkeypatch.setenv("TVIS_SERVER", server.address)
    tvis.catch(1, name="via_env")
    assert wait_until(lambda: server.store.entries("via_env"))


def test_catching_before_the_server_starts_still_delivers_later_catches():
    port = free_port()
    address = f"127.0.0.1:{port}"
    for step in range(3):
        tvis.catch(step, name="early", server=address)
    time.sleep(0.3)
    late_server = LiveServer("127.0.0.1", port)
    late_server.start()
    try:
        for step in range(3):
            tvis.catch(step, name="late", server=address)
        assert wait_until(lambda: len(late_server.store.entries("late")) == 3)
    finally:
        late_server.stop()


def test_full_queue_drops_oldest_and_the_server_hears_the_count():
    port = free_port()
    sender = Sender(parse_address(f"127.0.0.1:{port}"), max_items=4)
    for step in range(10):
        sender.put("x", step + 1, step, 0)
    assert sender.stats.dropped == {"x": 6}
    live = LiveServer("127.0.0.1", port)
    live.start()
    try:
        assert wait_until(lambda: len(live.store.entries("x")) == 4)
        assert [e.value for e in live.store.entries("x")] == [6, 7, 8, 9]
        assert live.store.info("x").dropped == 6
    finally:
        live.stop()


def test_killing_the_server_mid_stream_never_raises_or_blocks_the_loop(capsys):
    child = python(SERVER_CHILD)
    port = int(child.stdout.readline())
    address = f"127.0.0.1:{port}"
    tensor = torch.randn(256, 1024)  # 1 MB
    worst = 0.0
    start = time.monotonic()
    killed = False
    while time.monotonic() - start < 2.0:
        if not killed and time.monotonic() - start > 0.5:
            child.kill()
            child.wait()
            killed = True
        t0 = time.perf_counter()
        tvis.catch(tensor, name="w", server=address)
        worst = max(worst, time.perf_counter() - t0)
    assert catching._senders[address].stats.sent > 0
    assert "tvis.catch" not in capsys.readouterr().err
    # A sanity bound only (a 1 MB copy and a queue put); the real figure is in bench/.
    assert worst < 1.0
    revived = LiveServer("127.0.0.1", port)
    revived.start()
    try:
        tvis.catch(torch.ones(2), name="after", server=address)
        assert wait_until(lambda: revived.store.entries("after"))
    finally:
        revived.stop()


def test_a_stalled_server_costs_the_loop_only_a_copy_and_drops_the_oldest():
    tensor = torch.randn(1024, 1024)  # 4 MB: the socket buffers fill after a few
    with stalled_server() as address:
        worst = 0.0
        for _ in range(100):
            t0 = time.perf_counter()
            tvis.catch(tensor, name="w", server=address)
            worst = max(worst, time.perf_counter() - t0)
        sender = catching._senders[address]
        assert wait_until(lambda: sender.stats.connected)
        # A sanity bound only (a 4 MB copy and a queue put); the real figure is in bench/.
        assert worst < 1.0
        assert sender.stats.dropped["w"] > 0
        assert sender.pending() <= sender.max_items + 1  # the queue and the one being written


def test_token_in_the_address_is_accepted_and_a_wrong_one_refused(capsys):
    live = LiveServer("127.0.0.1", 0, token="s3cret")
    live.start()
    try:
        tvis.catch(1, name="good", server=f"s3cret@{live.address}")
        assert wait_until(lambda: live.store.entries("good"))
        tvis.catch(2, name="bad", server=f"guess@{live.address}")
        # Refused at the handshake, before a frame is read: nothing of it can arrive later.
        assert wait_until(lambda: live.stats.refused >= 1)
        assert live.store.entries("bad") == []
        bad = catching._senders[f"guess@{live.address}"]
        assert wait_until(lambda: bad.stats.last_error)  # the sender notes it after the server
        assert "refused" in bad.stats.last_error
        assert "refused us: wrong or missing token" in capsys.readouterr().err
    finally:
        live.stop()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_tensors_of_any_strides_and_dtype_arrive_with_their_values(server):
    layer = torch.nn.Linear(16, 8).cuda()
    sent = {
        "transposed": torch.randn(64, 32, device="cuda").t(),
        "bf16_strided": torch.randn(8, 8, device="cuda", dtype=torch.bfloat16)[:, ::2],
        "parameter": layer.weight,
    }
    for name, value in sent.items():
        tvis.catch(value, name=name, server=server.address)
    assert wait_until(lambda: len(server.store.names()) == len(sent))
    for name, value in sent.items():
        (back,) = received(server, name)
        assert back.device.type == "cpu" and back.dtype == value.dtype
        assert torch.equal(back, value.detach().cpu())
