"""`read` and data frames: raw values from a real agent subprocess, several chunks in
flight, each landing in its place in the caller's buffer."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from tvis.agent.client import LocalClient, PipeClient
from tvis.agent.protocol import AgentError
from tvis.store.reader import RunReader


def _agent(runs_root) -> PipeClient:
    argv = [sys.executable, "-m", "tvis.cli", "agent", "--stdio", "--root", str(runs_root)]
    client = PipeClient(argv, name="test agent")
    client.handshake()
    return client


def _stored(run, tensor: int) -> bytes:
    return RunReader(run.path).batch(0).array(tensor).tobytes()


def test_call_read_returns_the_stored_bytes(runs_root, run):
    with _agent(runs_root) as client:
        data = client.call("read", run=run.name, batch=0, tensor=run.conv, offset=100, length=64)
        tail = client.call("read", run=run.name, batch=0, tensor=run.logits, offset=150)
    assert data == _stored(run, run.conv)[100:164]
    assert tail == _stored(run, run.logits)[150:]  # clipped at the end
    local = LocalClient(runs_root).call("read", run=run.name, batch=0, tensor=run.conv, length=64)
    assert local == _stored(run, run.conv)[:64]


def test_read_values_in_many_small_chunks_fills_the_buffer(runs_root, run):
    out = bytearray(4 * 8 * 16 * 16 * 4)
    seen = []
    with _agent(runs_root) as client:
        client.read_size = 1000  # 33 chunks, 4 in flight, the last one short
        client.read_values(
            memoryview(out),
            lambda d, t: seen.append((d, t)),
            run=run.name,
            batch=0,
            tensor=run.conv,
        )
    assert bytes(out) == _stored(run, run.conv)
    assert [d for d, _ in seen] == sorted({d for d, _ in seen}) and seen[-1] == (len(out),) * 2


def test_read_values_of_a_gradient_in_process(runs_root, run):
    out = np.empty((4, 8, 16, 16), np.float32)
    LocalClient(runs_root).read_values(
        memoryview(out).cast("B"), run=run.name, batch=0, tensor=run.conv, grad=True
    )
    grad = RunReader(run.path).batch(0).tensor(run.conv)["grad"]
    assert out.tobytes() == _stored(run, grad)


@pytest.mark.parametrize(
    ("params", "status", "words"),
    [
        ({"offset": 1 << 30}, 400, "past the"),
        ({"length": 1 << 30}, 400, "length <="),
        ({"tensor_key": "stats_only"}, 404, "values were not kept"),
    ],
)
def test_bad_reads_are_one_sentence(runs_root, run, params, status, words):
    tensor = getattr(run, params.pop("tensor_key", "conv"))
    with _agent(runs_root) as client, pytest.raises(AgentError) as e:
        client.call("read", run=run.name, batch=0, tensor=tensor, **params)
    assert e.value.status == status and words in e.value.message


def test_a_short_chunk_fails_the_read_and_the_client_stays_in_step(runs_root, run):
    out = bytearray(4 * 8 * 16 * 16 * 4 + 8)  # 8 bytes more than the tensor holds
    with _agent(runs_root) as client:
        client.read_size = 4096
        with pytest.raises(AgentError, match="the agent sent 0 bytes where 8 were asked for"):
            client.read_values(memoryview(out), run=run.name, batch=0, tensor=run.conv)
        assert client.call("hello", protocol=1)["protocol"] == 1  # still in step
