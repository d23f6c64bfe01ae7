"""The viewer's first requests: the handshake and the list of runs go out together, and the
handshake's failures read as they did when each request waited for the last."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

from tvis.agent import client as agent_client
from tvis.agent.client import LocalProcessClient, greet, greet_and_list
from tvis.agent.protocol import NOT_FOUND, VERSION_MISMATCH, AgentError
from tvis.agent.target import Target

WAIT_S = 30.0
"""Generous: the suite shares two cores with other rooms' tests."""


def _until(predicate, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def test_the_handshake_and_the_runs_are_on_the_wire_before_either_is_answered(
    runs_root: Path,
):
    """With the agent stopped (it answers nothing), both requests are sent: the list does
    not wait for the handshake's answer. Let go, it answers both."""
    client = LocalProcessClient(runs_root, echo_stderr=False)
    os.kill(client.pid, signal.SIGSTOP)
    got: dict = {}

    def greeting_thread() -> None:
        got["client"], got["runs"] = greet_and_list(client, Target(path=str(runs_root)))

    greeting = threading.Thread(target=greeting_thread)
    try:
        greeting.start()
        _until(
            lambda: sorted(client._methods.values()) == ["hello", "runs"],
            "both requests on the wire",
        )
        assert "client" not in got  # nothing was answered
    finally:
        os.kill(client.pid, signal.SIGCONT)
    greeting.join(WAIT_S)
    try:
        assert got["client"] is client and client.info["runs"] == len(got["runs"]) == 1
        assert got["runs"][0]["run"]
    finally:
        client.close()


def test_an_agent_of_another_protocol_is_the_handshakes_sentence(runs_root: Path, monkeypatch):
    """The list asked with the handshake changes nothing when the agent refuses it: the
    same sentence as a lone handshake, and the client is closed."""
    target = Target(path=str(runs_root))
    monkeypatch.setattr(agent_client, "PROTOCOL_VERSION", agent_client.PROTOCOL_VERSION + 1)
    alone = LocalProcessClient(runs_root, echo_stderr=False)
    with pytest.raises(AgentError) as lone:
        greet(alone, target)
    listed = LocalProcessClient(runs_root, echo_stderr=False)
    with pytest.raises(AgentError) as both:
        greet_and_list(listed, target)
    assert both.value.status == lone.value.status == VERSION_MISMATCH
    assert both.value.message == lone.value.message
    with pytest.raises(AgentError):
        listed.call("runs")  # closed


def test_a_folder_without_runs_is_the_same_sentence(tmp_path: Path):
    target = Target(path=str(tmp_path))
    with pytest.raises(AgentError) as lone:
        greet(LocalProcessClient(tmp_path, echo_stderr=False), target)
    with pytest.raises(AgentError) as both:
        greet_and_list(LocalProcessClient(tmp_path, echo_stderr=False), target)
    assert both.value.status == lone.value.status == NOT_FOUND
    assert both.value.message == lone.value.message
    assert both.value.message.startswith(f"no tvis runs under {tmp_path}")
