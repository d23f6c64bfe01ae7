"""The agent stays up for every run: a FIFO in one run, requests stuck on a hung mount, a
flood of requests that decode big, a pid past a C long, none of them stops it answering."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import msgpack
import pytest
from hostile_client import peak_rss_mb
from support import TVIS

from tvis.agent import server as server_module
from tvis.agent.api import AgentAPI
from tvis.agent.client import LocalProcessClient
from tvis.agent.protocol import AgentError, decode, frame, read_frame
from tvis.agent.server import StdioServer
from tvis.store.format import BATCHES, BLOB, INDEX, META, RUN_INDEX

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "agent"))
from synthetic_run import build_run  # noqa: E402

# Seconds any one answer may take here; the agent answers these in milliseconds.
PROMPT_S = 10.0


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A good run and one whose batch files and run index are FIFOs."""
    good = build_run(tmp_path, name="tvis_runs/20260101-120000_good_000000")
    bad = build_run(tmp_path, name="tvis_runs/20250101-120000_fifo_000000")
    for path in (bad.path / BATCHES / "000000" / INDEX, bad.path / BATCHES / "000001" / BLOB):
        path.unlink()
        os.mkfifo(path)
    assert good.name != bad.name
    return tmp_path


def test_a_fifo_in_one_run_never_holds_up_the_agent(root: Path):
    bad = "tvis_runs/20250101-120000_fifo_000000"
    with LocalProcessClient(root, echo_stderr=False) as client:
        client.handshake()
        with ThreadPoolExecutor(24) as pool:
            stuck = [pool.submit(client.call, "calls", run=bad, batch=0) for _ in range(16)]
            stuck += [
                pool.submit(client.call, "array", run=bad, batch=1, tensor=0) for _ in range(4)
            ]
            runs = pool.submit(client.call, "runs").result(timeout=PROMPT_S)
            for future in stuck:
                with pytest.raises(AgentError) as e:
                    future.result(timeout=PROMPT_S)
                assert "not a regular file" in e.value.message
    assert {r["run"] for r in runs} == {bad, "tvis_runs/20260101-120000_good_000000"}


def test_requests_stuck_on_one_run_do_not_starve_the_others(tmp_path: Path, monkeypatch):
    """A hung mount cannot be made in a test; a request that blocks until released stands in
    for one, through the real server, its threads and its pipes."""
    build_run(tmp_path)
    release = threading.Event()
    real_handle = server_module.handle

    def handle(api, request):
        if request.get("method") == "hung":
            release.wait(60)
            return {"id": request["id"], "result": "released"}
        return real_handle(api, request)

    monkeypatch.setattr(server_module, "handle", handle)
    requests_r, requests_w = os.pipe()
    replies_r, replies_w = os.pipe()
    server = StdioServer(AgentAPI(tmp_path), os.fdopen(requests_r, "rb"), replies_w)
    serving = threading.Thread(target=server.serve, daemon=True)
    serving.start()
    replies = os.fdopen(replies_r, "rb")
    try:
        for rid in range(1, 21):  # more than the steady workers, each stuck
            os.write(requests_w, frame(msgpack.packb({"id": rid, "method": "hung", "params": {}})))
        time.sleep(0.2)
        os.write(requests_w, frame(msgpack.packb({"id": 99, "method": "runs", "params": {}})))
        answered = threading.Event()
        got: list = []

        def read() -> None:
            got.append(decode(read_frame(replies, 1 << 26)))
            answered.set()

        threading.Thread(target=read, daemon=True).start()
        assert answered.wait(PROMPT_S), "a cheap request waited behind stuck ones"
        assert got[0]["id"] == 99 and got[0]["result"][0]["status"] == "complete"
    finally:
        release.set()
        os.close(requests_w)
        serving.join(timeout=PROMPT_S)


# A request frame the agent must decode: just under the 1 MiB frame bound, ~1M empty
# arrays in 16 lists (80 MB as Python lists, if decoded whole).
_FLOOD_PARAMS = (
    b"\x81\xa1x\xdc\x00\x10" + (b"\xdd" + (61_000).to_bytes(4, "big") + b"\x90" * 61_000) * 16
)


def _flood_frame(rid: int) -> bytes:
    head = b"\x83\xa2id" + msgpack.packb(rid) + b"\xa6method\xa5hello\xa6params"
    return frame(head + _FLOOD_PARAMS)


def test_a_flood_of_requests_that_decode_big_stays_within_the_agent_bounds(tmp_path: Path):
    build_run(tmp_path)
    agent = subprocess.Popen(
        [TVIS, "agent", "--stdio", "--root", str(tmp_path)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        hello = {"id": 0, "method": "hello", "params": {"protocol": 1}}
        agent.stdin.write(frame(msgpack.packb(hello)))
        agent.stdin.flush()
        assert decode(read_frame(agent.stdout, 1 << 26))["id"] == 0
        before = peak_rss_mb(agent.pid)
        writer = threading.Thread(
            target=lambda: [agent.stdin.write(_flood_frame(i)) for i in range(1, 49)], daemon=True
        )
        writer.start()
        replies = [decode(read_frame(agent.stdout, 1 << 26)) for _ in range(48)]
        grew = peak_rss_mb(agent.pid) - before
    finally:
        agent.stdin.close()
        agent.wait(timeout=PROMPT_S)
    assert all(r["status"] == 400 and "objects" in r["error"] for r in replies)
    assert grew < 40, f"the agent grew by {grew:.0f} MB"


def test_a_pid_past_a_c_long_is_one_unreadable_row(tmp_path: Path):
    run = build_run(tmp_path, name="tvis_runs/20250101-120000_pid_000000")
    build_run(tmp_path, name="tvis_runs/20260101-120000_good_000000")
    meta = json.loads((run.path / META).read_text())
    meta.update(pid=2**70, status="running", host=socket.gethostname())
    (run.path / META).write_text(json.dumps(meta))
    done = subprocess.run([TVIS, "ls", "--json", str(tmp_path)], capture_output=True, text=True)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    rows = {r["run_id"]: r for r in map(json.loads, done.stdout.splitlines())}
    assert rows[run.path.name]["status"] == "unreadable"
    assert rows["20260101-120000_good_000000"]["status"] == "complete"
    listed = AgentAPI(tmp_path).runs()
    assert [r["status"] for r in listed] == ["complete", "unreadable"]
    assert "pid" in listed[1]["error"]


def test_tvis_ls_and_the_agent_agree_on_a_run_that_links_outside(tmp_path: Path):
    root, outside = tmp_path / "root", tmp_path / "outside"
    build_run(root)
    stranger = build_run(outside, name="tvis_runs/20250101-000000_secret_000000")
    (root / "tvis_runs" / "escape").symlink_to(stranger.path)
    linked = build_run(root, name="tvis_runs/20240101-000000_linked_000000")
    (linked.path / RUN_INDEX).unlink()
    (linked.path / RUN_INDEX).symlink_to(stranger.path / RUN_INDEX)
    done = subprocess.run([TVIS, "ls", "--json", str(root)], capture_output=True, text=True)
    listed_here = {r["run_id"]: r["status"] for r in map(json.loads, done.stdout.splitlines())}
    listed_there = {r["run_id"]: r["status"] for r in AgentAPI(root).runs()}
    assert listed_here == listed_there
    assert "escape" not in listed_here and listed_here[linked.path.name] == "unreadable"


def test_tvis_ls_here_prints_no_control_characters_from_a_run(tmp_path: Path):
    run = build_run(tmp_path, name="tvis_runs/20250101-120000_esc_000000")
    meta = json.loads((run.path / META).read_text())
    meta["script"] = "\x1b]52;c;ZWNobyBwd25lZA==\x07\x1b]0;pwned\x07train.py\x9b2J"
    (run.path / META).write_text(json.dumps(meta))
    done = subprocess.run([TVIS, "ls", str(tmp_path)], capture_output=True, text=True)
    assert done.returncode == 0 and "train.py" in done.stdout, done.stderr
    assert not [c for c in done.stdout if ord(c) < 32 and c != "\n" or 0x7F <= ord(c) < 0xA0]
