"""The stdio server against bad input, concurrency, and a torch-free process."""

from __future__ import annotations

import io
import os
import select
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from agent_process import AgentProcess

from tvis.agent import dispatch, workers
from tvis.agent.api import AgentAPI
from tvis.agent.client import AgentError, ConnectionLost, PipeClient
from tvis.agent.protocol import (
    HEADER,
    MAX_REPLY_FRAME,
    PROTOCOL_VERSION,
    decode,
    encode,
    frame,
    read_frame,
)
from tvis.agent.server import StdioServer

# Python run before the CLI in the agent's process: any `import torch` fails there.
BLOCK_TORCH = """
import sys
class _NoTorch:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ImportError("torch is blocked in this test")
sys.meta_path.insert(0, _NoTorch())
"""


def frames_in(data: bytes) -> list[dict]:
    """Every frame in ``data``; fails if anything else is there."""
    stream, found = io.BytesIO(data), []
    while (body := read_frame(stream, MAX_REPLY_FRAME)) is not None:
        found.append(decode(body))
    return found


def test_hello_over_stdio(agent_process):
    reply = agent_process.ask("hello", protocol=PROTOCOL_VERSION, version="test")
    assert reply["result"]["protocol"] == PROTOCOL_VERSION


def test_random_bytes_then_end_of_input_exit_cleanly_with_only_frames_on_stdout(agent_process):
    agent_process.send_raw(os.urandom(1 << 16))
    code, out, err = agent_process.finish()
    assert code == 0 and "Traceback" not in err
    assert all(f["status"] == 400 for f in frames_in(out))


def test_an_agent_whose_viewer_leaves_at_once_exits_cleanly(runs_root):
    """Its input ends as it starts (a viewer closed, an ssh link dropped): the agent ended
    while its thread still imported the value decoders, and the interpreter, finalized
    under that import, crashed in about 1 exit in 13 (SIGSEGV). Twenty-four starts."""
    for _ in range(24):
        agent = AgentProcess(runs_root)
        code, out, err = agent.finish()
        assert code == 0 and out == b"" and "Traceback" not in err, (code, err)


@pytest.mark.parametrize(
    "body",
    [
        b"\xc1\xc1\xc1",
        b"\x93\x01",
        encode([1, 2]),
        encode({"method": "hello"}),
        encode({"id": "x"}),
    ],
    ids=["not-msgpack", "truncated-msgpack", "not-a-map", "no-id", "string-id"],
)
def test_a_bad_frame_is_answered_and_the_next_request_served(agent_process, body):
    agent_process.send_raw(frame(body))
    error = agent_process.reply()
    assert error["id"] is None and error["status"] == 400
    assert agent_process.ask("hello", protocol=PROTOCOL_VERSION)["result"]["runs"] == 1


def test_an_oversized_frame_is_refused_skipped_and_serving_goes_on(agent_process):
    agent_process.send_raw(HEADER.pack(3 << 20) + os.urandom(3 << 20))
    error = agent_process.reply()
    assert error["status"] == 400 and "exceeds" in error["error"]
    assert "result" in agent_process.ask("hello", protocol=PROTOCOL_VERSION)


def test_a_4gb_length_prefix_costs_no_memory(agent_process):
    agent_process.ask("hello", protocol=PROTOCOL_VERSION)
    before = agent_process.rss_kib()
    agent_process.send_raw(HEADER.pack(0xFFFFFFFF))
    assert agent_process.reply()["status"] == 400
    junk = os.urandom(1 << 20)
    for _ in range(64):
        agent_process.send_raw(junk)
    assert agent_process.rss_kib() - before < 32 * 1024
    code, _, err = agent_process.finish()
    assert code == 0 and "Traceback" not in err


def test_a_truncated_frame_at_the_end_exits_cleanly(agent_process):
    agent_process.send_raw(frame(encode({"id": 1, "method": "runs"}))[:-3])
    code, out, err = agent_process.finish()
    assert code == 0 and out == b"" and "Traceback" not in err


def test_unknown_methods_and_wrong_types_are_answered(agent_process, run):
    assert agent_process.ask("format_disk")["status"] == 400
    assert agent_process.ask("view", run=run.name, batch=[0], tensor=1)["status"] == 400
    assert agent_process.ask("view", run="../../etc", batch=0, tensor=1)["status"] == 400
    assert agent_process.ask("runs")["result"][0]["run"] == run.name


def test_nan_and_inf_in_a_reply_travel(agent_process, run):
    view = agent_process.ask(
        "view", run=run.name, batch=0, tensor=run.relu, sample=0, width=16, height=16
    )
    array = view["result"]["array"]
    assert np.isnan(array[0, 0]) and np.isinf(array[0, 1])


def test_stray_prints_never_reach_the_frame_stream(runs_root):
    noisy = BLOCK_TORCH + (
        "import os\nfrom tvis.agent import dispatch\n"
        "def noisy(self):\n"
        "    print('stray print')\n"
        "    os.write(1, b'stray bytes')\n"
        "    return 'ok'\n"
        "dispatch.METHODS['noisy'] = noisy\n"
    )
    agent = AgentProcess(runs_root, prelude=noisy)
    try:
        assert agent.ask("noisy")["result"] == "ok"
        code, out, err = agent.finish()
    finally:
        agent.kill()
    assert code == 0 and frames_in(out) == []
    assert "stray print" in err and "stray bytes" in err


def test_the_agent_runs_without_torch(runs_root, run):
    agent = AgentProcess(runs_root, prelude=BLOCK_TORCH)
    try:
        assert agent.ask("hello", protocol=PROTOCOL_VERSION)["result"]["runs"] == 1
        view = agent.ask("view", run=run.name, batch=0, tensor=run.conv, sample=0)
        assert view["result"]["array"].shape == (16, 16)
        code, _, err = agent.finish()
    finally:
        agent.kill()
    assert code == 0 and "torch" not in err


def test_the_clients_and_targets_import_neither_torch_nor_textual(runs_root):
    code = BLOCK_TORCH + (
        "import sys\n"
        "from tvis.agent.client import connect\n"
        "from tvis.agent.target import Target\n"
        "import tvis.targets, tvis.agent.command\n"
        f"c = connect(Target(path={str(runs_root)!r}))\n"
        "c.call('runs')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'textual')))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_twenty_threads_over_a_real_agent_get_their_own_replies(runs_root, run):
    argv = [sys.executable, "-m", "tvis.cli", "agent", "--stdio", "--root", str(runs_root)]
    with PipeClient(argv, name="test agent") as client:
        client.handshake()

        def ask(i: int) -> tuple[int, dict]:
            return i, client.call(
                "view", run=run.name, batch=0, tensor=run.conv, sample=i % 4, index=[i % 8]
            )

        with ThreadPoolExecutor(20) as pool:
            results = list(pool.map(ask, range(20)))
    local = AgentAPI(runs_root)
    for i, view in results:
        expected = local.view(run.name, run.conv, batch=0, sample=i % 4, index=[i % 8])["array"]
        np.testing.assert_array_equal(view["array"], expected)
        assert view["index"] == [i % 8] and view["sample"] == i % 4


def test_a_killed_agent_fails_waiting_and_later_calls_with_connection_lost(runs_root):
    argv = [sys.executable, "-m", "tvis.cli", "agent", "--stdio", "--root", str(runs_root)]
    client = PipeClient(argv, name="test agent")
    try:
        client.handshake()
        client._proc.kill()
        with pytest.raises(ConnectionLost) as e:
            client.call("runs")
        assert "dropped" in e.value.message
        with pytest.raises(ConnectionLost):
            client.call("runs")
    finally:
        client.close()


def test_garbage_before_the_agent_is_explained(tmp_path):
    # A login banner, then an agent that would wait for requests until stdin ends.
    script = "import sys; print('Welcome to the cluster!', flush=True); sys.stdin.read()"
    argv = [sys.executable, "-c", script]
    client = PipeClient(argv, name="noisy host", echo_stderr=False)
    try:
        with pytest.raises(AgentError) as e:
            client.handshake()
        assert "startup files" in e.value.message
    finally:
        client.close()


def test_a_slow_request_does_not_hold_back_a_cheap_one(monkeypatch, runs_root):
    release = threading.Event()

    def slow(self) -> str:
        release.wait(timeout=30)
        return "slow"

    monkeypatch.setitem(dispatch.METHODS, "slow", slow)
    requests_r, requests_w = os.pipe()
    replies_r, replies_w = os.pipe()
    server = StdioServer(AgentAPI(runs_root), os.fdopen(requests_r, "rb"), replies_w)
    thread = threading.Thread(target=server.serve, daemon=True)
    thread.start()
    with os.fdopen(requests_w, "wb") as requests, os.fdopen(replies_r, "rb") as replies:
        requests.write(frame(encode({"id": 1, "method": "slow"})))
        requests.write(
            frame(encode({"id": 2, "method": "hello", "params": {"protocol": PROTOCOL_VERSION}}))
        )
        requests.flush()
        first = decode(read_frame(replies, MAX_REPLY_FRAME))
        release.set()
        second = decode(read_frame(replies, MAX_REPLY_FRAME))
    thread.join(timeout=10)
    os.close(replies_w)
    assert first["id"] == 2 and second == {"id": 1, "result": "slow"}


def _ready(stream, timeout: float) -> bool:
    """Whether a reply frame starts arriving on ``stream`` within ``timeout`` seconds."""
    return bool(select.select([stream], [], [], timeout)[0])


def test_a_background_request_waits_for_those_a_client_waits_for(monkeypatch, runs_root, run):
    """A prefetch (``"background": true``) starts only once no other request runs: a `layers`
    page asked while a slow request runs is answered at once, the prefetch sent before it
    only after the slow one."""
    monkeypatch.setattr(workers, "SLOW_S", 60.0)  # the slow one never counts as stuck here
    release = threading.Event()

    def slow(self) -> str:
        release.wait(timeout=30)
        return "slow"

    monkeypatch.setitem(dispatch.METHODS, "slow", slow)
    requests_r, requests_w = os.pipe()
    replies_r, replies_w = os.pipe()
    server = StdioServer(AgentAPI(runs_root), os.fdopen(requests_r, "rb"), replies_w)
    thread = threading.Thread(target=server.serve, daemon=True)
    thread.start()
    hello = {"protocol": PROTOCOL_VERSION}
    layers = {"run": run.name, "batch": 0, "sort": "order", "desc": False, "limit": 2}
    with os.fdopen(requests_w, "wb") as requests, os.fdopen(replies_r, "rb") as replies:
        for request in (
            {"id": 1, "method": "slow"},
            {"id": 2, "method": "hello", "params": hello, "background": True},
            {"id": 3, "method": "layers", "params": layers},
        ):
            requests.write(frame(encode(request)))
        requests.flush()
        first = decode(read_frame(replies, MAX_REPLY_FRAME))
        held = not _ready(replies, 0.5)  # the prefetch, cheap as it is, is not answered yet
        release.set()
        then = [decode(read_frame(replies, MAX_REPLY_FRAME))["id"] for _ in range(2)]
    thread.join(timeout=10)
    os.close(replies_w)
    assert first["id"] == 3 and len(first["result"]["rows"]) == 2
    assert held and then == [1, 2]


def test_a_background_request_is_served_when_nothing_else_runs(agent_process):
    agent_process.send_raw(
        frame(encode({"id": 7, "method": "hello", "params": {}, "background": True}))
    )
    assert agent_process.reply()["id"] == 7
