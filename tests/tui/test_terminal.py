"""The viewer as a user runs it: `tvis tui` in a real terminal (tmux), locally and over the
real loopback sshd, with torch made unimportable so any import of it fails loudly."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

TVIS = str(Path(sys.executable).with_name("tvis"))
ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")

STRAY_ESCAPES = re.compile(r"\x1b|\^\[|\[\?\d|\[\d+;\d+R|\[0m")


class Tmux:
    """One tmux server of our own (a private socket) running one command in a pane of
    ``size`` (120×40 unless asked)."""

    def __init__(self, tmp_path: Path, command: str, size: tuple[int, int] = (120, 40)) -> None:
        self.socket = f"tvis-test-{os.getpid()}-{time.monotonic_ns()}"
        self.tmux(
            "new-session",
            "-d",
            "-s",
            "main",
            "-x",
            str(size[0]),
            "-y",
            str(size[1]),
            f"{command}; echo TVIS-EXIT=$?; sleep 600",
        )

    def tmux(self, *args: str) -> str:
        # COLUMNS/LINES left in the environment (pytest's terminal writer sets them) would
        # override the pane's real size for every program in it.
        env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
        return subprocess.run(
            ["tmux", "-L", self.socket, *args],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
            env=env,
        ).stdout

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", "main")

    def keys(self, *keys: str) -> None:
        for key in keys:
            self.tmux("send-keys", "-t", "main", key)
            time.sleep(0.15)

    def wait(self, text: str, timeout: float = 60.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            screen = self.screen()
            if text in screen:
                return screen
            time.sleep(0.1)
        raise AssertionError(f"{text!r} never appeared on the terminal:\n{self.screen()}")

    def wait_gone(self, text: str, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text not in self.screen():
                return
            time.sleep(0.1)
        raise AssertionError(f"{text!r} stayed on the terminal:\n{self.screen()}")

    def close(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True, timeout=30)


def _drive(term: Tmux) -> str:
    """What a user does: Replay opens first; go to Explore, see the tree and the inspector,
    expand, move, open help, quit. The Explore screen as first seen (the status line says
    where the runs are)."""
    term.wait("1 Replay")
    term.wait("paused")
    term.keys("2")
    term.wait("ShapesCNN")
    explore = term.wait("outputs")
    assert "images halfcell" in term.screen()  # tmux: half blocks, no graphics probe
    term.keys("l")
    term.wait("features")
    term.keys("l")
    term.wait("Sequential  features")  # the inspector follows the cursor
    term.keys("?")
    term.wait("Keys —")
    term.keys("Escape")
    # A busy app reads ESC and a q that follows at once as one key, alt+q, as any terminal
    # program does: a user presses q once the help has gone.
    term.wait_gone("Keys —")
    term.keys("q")
    screen = term.wait("TVIS-EXIT=0")
    assert "Traceback" not in screen and not STRAY_ESCAPES.search(screen), screen
    return explore


def test_tvis_tui_in_tmux_shows_the_model_navigates_and_quits_cleanly(run_dir, tmp_path, no_torch):
    # Textual draws on stderr, so nothing is redirected: a traceback would show on the screen.
    command = f"PYTHONPATH={shlex.quote(str(no_torch))} {TVIS} tui {shlex.quote(str(run_dir))}"
    term = Tmux(tmp_path, command)
    try:
        _drive(term)
    finally:
        term.close()


def test_tvis_tui_over_the_real_sshd_shows_the_same_page(run_dir, tmp_path, no_torch, ssh_lab):
    command = (
        f"TVIS_SSH_COMMAND={shlex.quote(f'ssh -F {ssh_lab.config}')} "
        f"XDG_RUNTIME_DIR={shlex.quote(str(ssh_lab.runtime_dir))} "
        f"PYTHONPATH={shlex.quote(str(no_torch))} {TVIS} tui "
        f"tvis-test:{shlex.quote(str(run_dir))} --remote-tvis {shlex.quote(ssh_lab.remote_tvis)}"
    )
    term = Tmux(tmp_path, command)
    try:
        explore = _drive(term)
        assert "ssh tvis-test" in explore  # the status line names the remote target
        assert ssh_lab.target.accepted() > 0  # and the real sshd carried the session
    finally:
        term.close()


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (from /proc)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def _environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(item.decode(errors="replace").partition("=")[::2] for item in raw if item)


def _cmdline(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs Linux's /proc")
def test_the_local_agent_runs_in_the_users_environment_not_the_viewers_tuning(run_dir, tmp_path):
    """The viewer runs numpy on one BLAS thread (test_command.py); its agent keeps the
    user's setting (its PCA of an embedding layer uses the threads), and none of the
    viewer's other tuning. (/proc shows a process's environment as it started: the
    agent's is the one it was given.)"""
    command = f"env -u OPENBLAS_NUM_THREADS -u TEXTUAL_FPS {TVIS} tui {shlex.quote(str(run_dir))}"
    term = Tmux(tmp_path, command)
    try:
        term.wait("1 Replay")
        shell = int(term.tmux("display-message", "-p", "-t", "main", "#{pane_pid}"))
        (viewer,) = [p for p in _children(shell) if " tui " in _cmdline(p)]
        (agent,) = [p for p in _children(viewer) if " agent " in _cmdline(p)]
        viewer_env, agent_env = _environ(viewer), _environ(agent)
        assert "OPENBLAS_NUM_THREADS" not in agent_env
        assert "TEXTUAL_FPS" not in agent_env
        assert agent_env.get("PATH") == viewer_env.get("PATH")  # the user's environment
    finally:
        term.close()


def test_the_viewer_process_never_imports_torch(run_dir, no_torch):
    script = textwrap.dedent(f"""
        import asyncio, sys
        sys.path.insert(0, {str(ROOT / "tests" / "tui")!r})
        from pathlib import Path
        from viewer_support import make_app, open_explore

        async def main():
            app = make_app(Path({str(run_dir)!r}))
            async with app.run_test(size=(200, 60)) as pilot:
                page = await open_explore(pilot)
                for key in ("l", "s", "y", "t", "p", "a", "g"):
                    await pilot.press(key)
                    await pilot.pause(0.3)
            assert app.internal_errors == [], app.internal_errors

        asyncio.run(main())
        loaded = sorted(m for m in sys.modules if m == "torch" or m.startswith("torch."))
        print("TORCH-MODULES", loaded)
    """)
    env = {**os.environ, "PYTHONPATH": str(no_torch)}
    result = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "TORCH-MODULES []" in result.stdout
