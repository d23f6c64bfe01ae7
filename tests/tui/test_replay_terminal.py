"""Replay in a real terminal: a whole recording played to the end in tmux at 80×24, and
the On-image overlay drawn as real pixels in a sixel terminal (xterm under Xvfb, through
the term-shot tool; skipped where it is absent)."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from test_terminal import STRAY_ESCAPES, TVIS, Tmux

TERM_SHOT = Path(os.environ.get("TVIS_TERM_SHOT", "/work/shared/tools/term-shot"))


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_replay_plays_a_whole_recording_to_the_end_in_tmux(run_dir, tmp_path, no_torch):
    command = f"PYTHONPATH={shlex.quote(str(no_torch))} {TVIS} tui {shlex.quote(str(run_dir))}"
    term = Tmux(tmp_path, command, size=(80, 24))
    try:
        term.wait("1 Replay")
        term.wait("paused")
        term.keys("plus", "plus", "plus", "space")  # 30 events a second
        term.wait("playing")
        screen = term.wait("end of the recording", timeout=120)
        assert "paused" in screen and "update" in screen
        term.keys("q")
        screen = term.wait("TVIS-EXIT=0")
        assert "Traceback" not in screen and not STRAY_ESCAPES.search(screen), screen
    finally:
        term.close()


@pytest.mark.skipif(
    not TERM_SHOT.exists() or not shutil.which("xterm") or not shutil.which("Xvfb"),
    reason="term-shot, xterm or Xvfb is not available",
)
def test_on_image_overlay_is_real_pixels_in_a_sixel_terminal(run_dir, tmp_path):
    from PIL import Image

    shot = tmp_path / "replay.png"
    # n: to the first forward layer (a conv); its map is painted over the input picture.
    result = subprocess.run(
        [
            str(TERM_SHOT),
            "--cols",
            "120",
            "--rows",
            "40",
            "--wait",
            "10",
            "--keys",
            "n",
            "--key-wait",
            "3",
            str(shot),
            "--",
            TVIS,
            "tui",
            "--images",
            "sixel",
            str(run_dir),
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert result.returncode == 0, result.stderr
    pixels = np.asarray(Image.open(shot).convert("RGB"))
    # The right third of the screen holds the layer view; text cells have a handful of
    # colours, a picture with a heat overlay has hundreds.
    view = pixels[: pixels.shape[0] * 2 // 3, pixels.shape[1] * 2 // 3 :]
    colours = np.unique(view.reshape(-1, 3), axis=0)
    assert len(colours) > 200, f"only {len(colours)} colours: no picture was drawn"
