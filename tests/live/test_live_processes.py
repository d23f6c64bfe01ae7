"""Promises that need separate processes: several senders, prompt exit, and no torch needed."""

from __future__ import annotations

import json
import os
import time

import torch
from live_support import free_port, python, stalled_server, wait_until

import tvis

SENDER_CHILD = """
    import torch, tvis
    for step in range(5):
        tvis.catch(torch.full((3,), float(step)), name="x")
"""

EXIT_CHILD = """
    import atexit, time, torch, tvis
    payload = torch.randn(1024, 1024)  # 4 MB
    for step in range(20):
        tvis.catch(payload, name="big")
    done = time.monotonic()
    # Registered after tvis's own exit hook, so it runs last and times it.
    atexit.register(lambda: print(f"{time.monotonic() - done:.3f}", flush=True))
"""


def test_two_sender_processes_reach_one_server(server):
    children = [
        python(SENDER_CHILD, env={"TVIS_SERVER": server.address, "RANK": str(rank)})
        for rank in (0, 1)
    ]
    for child in children:
        assert child.wait(timeout=120) == 0, child.stderr.read()
    assert wait_until(lambda: len(server.store.entries("x")) == 10)
    entries = server.store.entries("x")
    assert {e.sender["rank"] for e in entries} == {0, 1}
    assert {e.sender["pid"] for e in entries} == {c.pid for c in children}
    for rank in (0, 1):
        mine = [e for e in entries if e.sender["rank"] == rank]
        assert [e.value.data.tolist() for e in mine] == [[float(s)] * 3 for s in range(5)]


def test_exit_with_pending_sends_and_no_server_returns_at_once():
    child = python(EXIT_CHILD, env={"TVIS_SERVER": f"127.0.0.1:{free_port()}"})
    out, err = child.communicate(timeout=120)
    assert child.returncode == 0, err
    assert float(out) < 0.5


def test_exit_with_a_stalled_server_waits_only_the_flush_deadline():
    with stalled_server() as address:
        child = python(EXIT_CHILD, env={"TVIS_SERVER": address})
        out, err = child.communicate(timeout=120)
    assert child.returncode == 0, err
    assert float(out) < 3.0  # the 1 s flush deadline plus slack for a loaded machine


def test_importing_live_and_its_page_never_imports_torch():
    child = python(
        """
        import sys
        import tvis, tvis.live, tvis.live.server, tvis.tui.pages.live
        tvis.catch(1.0, name="no_torch")
        print("torch" in sys.modules)
        """
    )
    out, err = child.communicate(timeout=120)
    assert out.strip() == "False", err


def test_session_without_torch_gets_numpy_arrays_and_bf16_as_float32():
    child = python(
        """
        import json, sys, time
        sys.modules["torch"] = None  # import torch now fails, as on a laptop without it
        import tvis
        tvis.serve(port=0)
        from tvis.live import session
        print(session.server().port, flush=True)
        deadline = time.monotonic() + 60
        while len(session.server().store.names()) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        w, b = tvis.get("w"), tvis.get("b")
        print(json.dumps([type(w).__module__, str(w.dtype), w.tolist(), str(b.dtype), b.tolist()]))
        """
    )
    port = int(child.stdout.readline())
    w = torch.arange(6.0).reshape(2, 3).t()
    b = torch.tensor([1.5, -2.25, 3e38]).to(torch.bfloat16)
    tvis.catch(w, name="w", server=f"127.0.0.1:{port}")
    tvis.catch(b, name="b", server=f"127.0.0.1:{port}")
    out, err = child.communicate(timeout=120)
    module, w_dtype, w_values, b_dtype, b_values = json.loads(out)
    assert module == "numpy" and w_dtype == "float32" and w_values == w.tolist()
    assert b_dtype == "float32" and b_values == b.float().tolist()


def test_forked_child_catches_through_its_own_sender(server):
    tvis.catch(0, name="parent", server=server.address)
    assert wait_until(lambda: server.store.entries("parent") != [])
    pid = os.fork()
    if pid == 0:
        tvis.catch(1, name="child", server=server.address)
        deadline = time.monotonic() + 20
        from tvis.live import catching

        while catching._senders[server.address].stats.sent < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        os._exit(0)
    if not wait_until(lambda: os.waitpid(pid, os.WNOHANG)[0] == pid, timeout=30):
        os.kill(pid, 9)
        raise AssertionError("the forked child hung")
    assert wait_until(lambda: server.store.entries("child") != [])
    assert server.store.entries("child")[0].sender["pid"] == pid


def test_first_catch_imports_only_the_sending_path(server):
    child = python(
        f"""
        import sys, time
        import numpy as np
        import tvis
        tvis.catch(np.ones(3), name="x", server="{server.address}")
        unwanted = ("rich", "textual", "torch", "tvis.live.server", "tvis.live.session",
                    "tvis.live.store", "tvis.live.report")
        print(sorted(m for m in unwanted if m in sys.modules), flush=True)
        """
    )
    out, err = child.communicate(timeout=120)
    assert out.strip() == "[]", err
    assert wait_until(lambda: server.store.entries("x") != [])
