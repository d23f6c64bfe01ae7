"""Fixtures for the live-catching tests: a server on a free port, and catch state per test."""

from __future__ import annotations

import pytest

from tvis.live import catching, session
from tvis.live.server import LiveServer


@pytest.fixture
def server():
    """A running LiveServer on a free loopback port, stopped afterwards."""
    live = LiveServer("127.0.0.1", 0)
    live.start()
    yield live
    live.stop()


@pytest.fixture(autouse=True)
def fresh_catch(monkeypatch):
    """Each test starts with no senders, no per-name call counts and no complaints made."""
    monkeypatch.setattr(catching, "_senders", {})
    monkeypatch.setattr(catching, "_counts", {})
    monkeypatch.setattr(catching, "_complaints", set())
    monkeypatch.delenv("TVIS_SERVER", raising=False)


@pytest.fixture
def session_server(monkeypatch):
    """`tvis.serve(port=0)` for this test only; the session's server is forgotten afterwards."""
    monkeypatch.setattr(session, "_server", None)
    monkeypatch.setattr(session, "_requested", None)
    session.serve(port=0)
    yield session.server()
    session.server().stop()
