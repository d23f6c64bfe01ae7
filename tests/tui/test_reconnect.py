"""An ssh drop mid-view, against the real sshd (and a local agent killed): the app goes
offline in one line, keeps the page as it was (greyed, taking no keys), reconnects with R
through the same connector and comes back on the same batch, sample and selection; q while
offline exits 0."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from textual.command import CommandPalette
from viewer_support import open_explore, screen_text, wait_for

from tvis.agent.target import Target
from tvis.tui.app import TvisApp
from tvis.tui.command import Dialer


def ssh_app(lab, run_dir: Path) -> TvisApp:
    target = Target(path=str(run_dir), host="tvis-test", remote_tvis=lab.remote_tvis)
    dialer = Dialer(target, ssh_command=lab.ssh_command, control_dir=lab.control_dir())
    dialer.first = dialer()
    return TvisApp(dialer, target.describe(), "halfcell")


def session_sshd(agent_pid: int) -> int:
    """The sshd process serving the agent's ssh session (its nearest "sshd:" ancestor)."""
    pid = agent_pid
    while pid > 1:
        stat = Path(f"/proc/{pid}/stat").read_text()
        pid = int(stat.rsplit(")", 1)[1].split()[1])  # the parent's pid
        if Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"sshd:"):
            return pid
    raise AssertionError(f"no sshd session process above pid {agent_pid}")


def drop(app: TvisApp) -> None:
    os.kill(session_sshd(app.data.client.info["pid"]), signal.SIGKILL)


async def test_a_drop_greys_the_page_and_r_restores_run_batch_sample_and_selection(
    ssh_lab, run_dir: Path
):
    app = ssh_app(ssh_lab, run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_explore(pilot)
        tree = page.calls.call_tree
        await pilot.press("full_stop", "right_square_bracket")
        await wait_for(pilot, lambda: tree.batch_index == 1 and tree.call_nodes(), "batch 1")
        await pilot.press("j", "j", "enter")
        await wait_for(
            pilot,
            lambda: page.selection and page.inspector.shown == page.selection,
            "a selected call in the inspector",
        )
        before = (app.run_name, app.batch, app.sample, page.selection.call)
        old_client = app.data.client
        drop(app)
        await wait_for(pilot, lambda: app.offline, "the app offline")
        status = screen_text(app).splitlines()[-1]
        assert "offline · R reconnects" in status
        assert page.query_one("#panes").disabled
        await pilot.press("full_stop", "right_square_bracket", "j")
        assert (app.batch, app.sample) == before[1:3]  # nothing half-updates while offline
        await pilot.press("ctrl+p")
        await wait_for(pilot, lambda: isinstance(app.screen, CommandPalette), "the palette")
        await pilot.press(*"reconnect")
        await wait_for(pilot, lambda: "reconnect" in screen_text(app), "the reconnect command")
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.offline is None, "the app back online")
        assert app.data.client is not old_client
        await wait_for(
            pilot,
            lambda: (
                tree.batch_index == before[1]
                and page.selection.call == before[3]
                and getattr(tree.cursor_node.data.call, "id", None) == before[3]
                and page.inspector.cards
                and all(c.ref for c in page.inspector.cards)
            ),
            "the same batch and call, with its cards from the new connection",
        )
        assert (app.run_name, app.batch, app.sample, page.selection.call) == before
        assert not page.query_one("#panes").disabled and app.internal_errors == []


async def test_q_after_a_drop_exits_0_with_one_sentence(ssh_lab, run_dir: Path):
    app = ssh_app(ssh_lab, run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        await open_explore(pilot)
        drop(app)
        await wait_for(pilot, lambda: app.offline, "the app offline")
        await pilot.press("q")
    assert app.return_code == 0
    assert app.offline.startswith("the connection to tvis-test dropped")


async def test_r_reconnects_from_the_keyboard(ssh_lab, run_dir: Path):
    app = ssh_app(ssh_lab, run_dir)
    async with app.run_test(size=(80, 24)) as pilot:
        page = await open_explore(pilot)
        drop(app)
        await wait_for(pilot, lambda: app.offline, "the app offline")
        await pilot.press("R")
        await wait_for(pilot, lambda: app.offline is None, "the app back online")
        await pilot.press("j")
        await wait_for(
            pilot, lambda: page.selection and page.inspector.shown == page.selection, "a new call"
        )
        assert app.internal_errors == []


async def test_a_local_agent_runs_apart_and_r_starts_a_new_one_when_it_dies(run_dir: Path):
    from viewer_support import make_app

    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_explore(pilot)
        first = app.data.client
        assert first.pid != os.getpid()  # the agent's work never holds the screen's GIL
        os.kill(first.pid, signal.SIGKILL)
        await wait_for(pilot, lambda: app.offline, "the app offline")
        assert app.offline.startswith("the connection to the local agent dropped")
        await pilot.press("R")
        await wait_for(pilot, lambda: app.offline is None, "the app back online")
        assert app.data.client.pid not in (first.pid, os.getpid())
        await pilot.press("j")
        await wait_for(
            pilot, lambda: page.selection and page.inspector.shown == page.selection, "a new call"
        )
        assert app.internal_errors == []
    assert app.data.client._proc.wait(timeout=5) is not None  # ended with the app
