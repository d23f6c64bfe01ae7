"""`tvis tui` as a command: image modes, and failures as one sentence with an exit status."""

from __future__ import annotations

import importlib
import os
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

from tvis.tui import images, keys

TVIS = str(Path(sys.executable).with_name("tvis"))


def _tvis(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [TVIS, *args],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        env={**os.environ, **(env or {})},
    )


def test_image_mode_defaults_to_half_blocks_inside_tmux():
    assert (
        images.resolve(None, {"TMUX": "/tmp/tmux-0/default,1,0", "TERM": "xterm-kitty"}, tty=True)
        == "halfcell"
    )


def test_image_mode_defaults_to_half_blocks_without_a_terminal():
    assert images.resolve(None, {"TERM": "xterm-kitty"}, tty=False) == "halfcell"


def test_image_mode_picks_kitty_graphics_in_kitty():
    assert images.resolve(None, {"TERM": "xterm-kitty"}, tty=True) == "kitty"


def test_image_mode_flag_wins_over_the_environment():
    assert images.resolve("sixel", {"TVIS_IMAGES": "halfcell"}, tty=False) == "sixel"
    assert images.resolve(None, {"TVIS_IMAGES": "kitty"}, tty=False) == "kitty"


def test_unknown_image_mode_in_the_environment_is_one_sentence():
    with pytest.raises(images.ImageModeError, match="use one of auto, kitty, sixel, halfcell"):
        images.resolve(None, {"TVIS_IMAGES": "png"}, tty=False)
    result = _tvis("tui", ".", env={"TVIS_IMAGES": "png"})
    assert result.returncode == 2
    assert (
        result.stderr.startswith("tvis: unknown image mode 'png'")
        and "Traceback" not in result.stderr
    )


def test_a_target_that_is_nothing_is_one_sentence_and_exit_2(tmp_path: Path):
    result = _tvis("tui", str(tmp_path / "no-such-folder"))
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "HOST:PATH" in result.stderr


def test_an_unreachable_ssh_host_is_one_sentence_and_exit_1(ssh_lab, tmp_path: Path):
    result = _tvis("tui", "tvis-closed:/runs", env={"TVIS_SSH_COMMAND": f"ssh -F {ssh_lab.config}"})
    assert result.returncode == 1
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines[0].startswith("tvis: connecting to ssh tvis-closed:/runs")
    assert len(lines) == 2 and lines[1].startswith("tvis: ") and "Traceback" not in result.stderr


def test_ssh_connects_while_the_viewer_imports_and_is_greeted_before_the_app_starts():
    """`tvis tui HOST:PATH` starts ssh before importing textual and the viewer, and waits
    for the handshake (where ssh may ask for a password) only once they are imported, still
    before the app takes the terminal; a failure there is one sentence and exit 1."""
    code = (
        "import sys\n"
        "from tvis import cli\n"
        "from tvis.agent.protocol import AgentError\n"
        "from tvis.tui import command\n"
        "def start(self):\n"
        "    print('start', 'textual' in sys.modules, flush=True)\n"
        "def connect_now(self):\n"
        "    print('greet', 'tvis.tui.app' in sys.modules, flush=True)\n"
        "    raise AgentError('ssh: gpu: no route to host.')\n"
        "command.Dialer.start, command.Dialer.connect_now = start, connect_now\n"
        "sys.exit(cli.main(['tui', 'gpu:/runs']))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert result.stdout.split() == ["start", "False", "greet", "True"], result.stderr
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        "tvis: connecting to ssh gpu:/runs …",
        "tvis: ssh: gpu: no route to host.",
    ]


def test_keymap_file_is_read_and_a_damaged_one_is_ignored_with_a_sentence(tmp_path: Path):
    good = tmp_path / "keymap.json"
    good.write_text('{"tree.down": "j,down,ctrl+n"}')
    assert keys.load_keymap(good) == ({"tree.down": "j,down,ctrl+n"}, None)
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    keymap, problem = keys.load_keymap(bad)
    assert keymap == {} and problem.startswith(f"ignored the keymap {bad}")
    unknown = tmp_path / "unknown.json"
    unknown.write_text('{"tree.down": "n", "no.such": "x"}')
    keymap, problem = keys.load_keymap(unknown)
    assert keymap == {"tree.down": "n"} and "no.such" in problem


def test_every_binding_has_a_unique_id():
    ids = [b.id for _, scope in keys.SCOPES for b in scope]
    assert all(ids) and len(ids) == len(set(ids))


def _tui_classes_with_bindings() -> list[type]:
    import tvis.tui

    found = []
    for info in pkgutil.walk_packages(tvis.tui.__path__, "tvis.tui."):
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            if (
                isinstance(value, type)
                and value.__module__ == info.name
                and "BINDINGS" in vars(value)
            ):
                found.append(value)
    return found


def test_every_binding_of_the_viewer_is_in_the_keys_table():
    table = {b.id for _, scope in keys.SCOPES for b in scope}
    outside = [
        f"{cls.__name__}: {getattr(b, 'id', None) or b}"
        for cls in _tui_classes_with_bindings()
        for b in vars(cls)["BINDINGS"]
        if getattr(b, "id", None) not in table
    ]
    assert outside == []


def test_a_keymap_remaps_bindings_that_used_to_live_outside_the_table(tmp_path: Path):
    path = tmp_path / "keymap.json"
    path.write_text(
        '{"live.older": "comma", "help.close": "x", "runs.close": "x", "calls.close": "x"}'
    )
    keymap, problem = keys.load_keymap(path)
    assert problem is None and keymap["live.older"] == "comma"


@pytest.mark.parametrize(("preset", "expected"), [(None, "240"), ("30", "30")])
def test_the_viewer_draws_up_to_240_frames_a_second_unless_textual_fps_says(
    monkeypatch, tmp_path: Path, preset: str | None, expected: str
):
    from tvis.cli import main

    if preset is None:
        monkeypatch.delenv("TEXTUAL_FPS", raising=False)
    else:
        monkeypatch.setenv("TEXTUAL_FPS", preset)
    # A target that is nothing: the command stops before the app starts, after the setting.
    assert main(["tui", str(tmp_path / "no-such-folder")]) == 2
    assert os.environ["TEXTUAL_FPS"] == expected


@pytest.mark.parametrize(("preset", "expected"), [(None, "1"), ("8", "8")])
def test_the_viewer_asks_openblas_for_one_thread_before_numpy_loads(
    tmp_path: Path, preset: str | None, expected: str
):
    """OpenBLAS reads the setting as numpy loads, and starts a thread per core without it
    (each spinning ~70 ms of CPU through the viewer's start); a user's own setting wins."""
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    if preset is not None:
        env["OPENBLAS_NUM_THREADS"] = preset
    probe = (
        "import os, sys\n"
        "from tvis.cli import main\n"
        f"code = main(['tui', {str(tmp_path / 'no-such-folder')!r}])\n"
        "print(code, 'numpy' in sys.modules, os.environ['OPENBLAS_NUM_THREADS'])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True
    )
    # Stopped before the app (a target that is nothing), after the setting, numpy unloaded.
    assert done.stdout.split() == ["2", "False", expected]


def test_the_frame_tracer_leaves_textual_tuned_as_the_viewer_tunes_it(tmp_path: Path):
    """bench/frames_trace imports Textual before `tvis tui` runs: it must tune it first, or
    frames_bench.py times a viewer drawing at 60 frames a second and holding ESC 100 ms."""
    from tvis.tui import command

    tracer = Path(__file__).resolve().parents[2] / "bench" / "frames_trace"
    env = {k: v for k, v in os.environ.items() if k not in ("TEXTUAL_FPS", "ESCDELAY")}
    env.update(TVIS_FRAMES=str(tmp_path / "frames.tsv"), PYTHONPATH=str(tracer))
    probe = "from textual import constants as c; print(c.MAX_FPS, round(c.ESCAPE_DELAY * 1000))"
    done = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True
    )
    assert done.stdout.split() == [str(command.FRAME_RATE), str(command.ESCAPE_DELAY_MS)]
