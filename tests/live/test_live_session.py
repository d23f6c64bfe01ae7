"""The session side: serve, get, get_all, ingest_all, summary, status, help."""

from __future__ import annotations

import socket

import pytest
import torch
from live_support import wait_until

import tvis
from tvis.live import report, session


def catch_and_wait(server, value, name: str, count: int = 1) -> None:
    tvis.catch(value, name=name, server=server.address)
    assert wait_until(lambda: len(server.store.entries(name)) == count)


def test_get_returns_newest_and_older_by_index(session_server):
    for step in range(3):
        catch_and_wait(session_server, torch.full((2,), float(step)), "w", count=step + 1)
    assert torch.equal(tvis.get("w"), torch.full((2,), 2.0))
    assert torch.equal(tvis.get("w", -3), torch.zeros(2))
    assert [t[0].item() for t in tvis.get_all("w")] == [0.0, 1.0, 2.0]


def test_get_of_an_unknown_name_says_what_to_do(session_server):
    with pytest.raises(KeyError, match="tvis.summary"):
        tvis.get("nothing")


def test_get_beyond_the_history_names_the_valid_range(session_server):
    catch_and_wait(session_server, 1, "x")
    with pytest.raises(IndexError, match="from -1 to 0"):
        tvis.get("x", -2)


def test_reading_before_serve_says_to_call_serve(monkeypatch):
    monkeypatch.setattr(session, "_server", None)
    with pytest.raises(RuntimeError, match=r"tvis\.serve\(\)"):
        tvis.get("x")


def test_serve_twice_is_harmless_and_elsewhere_moves_keeping_what_was_caught(session_server):
    tvis.serve(port=0)
    assert session.server() is session_server
    catch_and_wait(session_server, 1, "before")
    tvis.serve(port=_free_port())
    moved = session.server()
    try:
        assert moved is not session_server and not session_server.running and moved.running
        assert tvis.get("before") == 1
        catch_and_wait(moved, 2, "after")  # a sender pointed at the new port arrives
        assert tvis.get("after") == 2
    finally:
        moved.stop()


def test_serve_listens_where_tvis_server_says_as_senders_send(monkeypatch):
    monkeypatch.setattr(session, "_server", None)
    monkeypatch.setattr(session, "_requested", None)
    port = _free_port()
    monkeypatch.setenv("TVIS_SERVER", f"127.0.0.1:{port}")
    tvis.serve()
    try:
        assert session.server().port == port
        tvis.catch(torch.arange(3), name="sent")  # the sender reads the same variable
        assert wait_until(lambda: "sent" in session.server().store.names())
        assert torch.equal(tvis.get("sent"), torch.arange(3))
    finally:
        session.server().stop()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_ingest_all_binds_newest_values_in_the_callers_globals(session_server):
    catch_and_wait(session_server, torch.ones(3), "ingested_weight")
    catch_and_wait(session_server, 0.5, "ingested_loss")
    catch_and_wait(session_server, 1, "not an identifier")
    try:
        bound = tvis.ingest_all()
        assert bound == ["ingested_weight", "ingested_loss"]
        assert torch.equal(globals()["ingested_weight"], torch.ones(3))
        assert globals()["ingested_loss"] == 0.5
    finally:
        globals().pop("ingested_weight", None)
        globals().pop("ingested_loss", None)


def test_summary_lists_every_name_with_its_shape_and_stats(session_server, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "160")
    catch_and_wait(session_server, torch.arange(6.0).reshape(2, 3), "w")
    catch_and_wait(session_server, "[/]hello", "msg[/]")
    tvis.summary()
    out = capsys.readouterr().out
    assert "2×3 float32" in out and "0 … 5" in out
    assert "msg[/]" in out and "'[/]hello'" in out


def test_status_prints_once_and_returns_what_arrived(session_server, capsys):
    catch_and_wait(session_server, 1.0, "loss")
    result = tvis.status()
    out = capsys.readouterr().out
    assert out.count("receiving on") == 1 and "loss" in out
    assert result.names == ["loss"] and result.received == 1
    assert result.address == session_server.address


def test_status_watch_refreshes_until_ctrl_c_then_returns(session_server, monkeypatch, capsys):
    catch_and_wait(session_server, 1.0, "loss")

    def interrupt(_):
        raise KeyboardInterrupt

    monkeypatch.setattr(report.time, "sleep", interrupt)
    result = tvis.status(watch=True)
    assert "loss" in capsys.readouterr().out
    assert result.names == ["loss"]


def test_help_lists_the_api(capsys):
    tvis.help()
    out = capsys.readouterr().out
    for name in ("catch", "serve", "get", "get_all", "ingest_all", "status", "summary"):
        assert f"tvis.{name}(" in out
