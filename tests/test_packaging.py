"""Installing tvis adds exactly one top-level module, and the viewer side needs no torch."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from support import ROOT

# Makes `import torch` fail in a child interpreter, as on a laptop without torch.
NO_TORCH = """
import sys
class _NoTorch:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ImportError("torch is not installed here")
sys.meta_path.insert(0, _NoTorch())
"""


def test_wheel_installs_one_top_level_module(tmp_path):
    # setuptools reuses build/lib between builds: a package dropped from pyproject.toml would
    # still ship from a stale copy there.
    shutil.rmtree(ROOT / "build", ignore_errors=True)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(tmp_path),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("tvis-*.whl")
    tops = {name.split("/")[0] for name in zipfile.ZipFile(wheel).namelist()}
    assert tops == {"tvis", next(t for t in tops if t.endswith(".dist-info"))}
    names = set(zipfile.ZipFile(wheel).namelist())
    installed_as = {"tvis": "tvis", "agent": "tvis/agent", "tui": "tvis/tui"}
    for room, target in installed_as.items():  # every package of every room is in the wheel
        for init in (ROOT / room).rglob("__init__.py"):
            assert f"{target}/{init.relative_to(ROOT / room).as_posix()}" in names, init


def test_editable_install_maps_agent_and_tui_under_tvis(tmp_path):
    code = (
        "import importlib.util as u, tvis.agent, tvis.tui;"
        "print(tvis.agent.__file__); print(tvis.tui.__file__);"
        "print(u.find_spec('agent'), u.find_spec('tui'))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True
    ).stdout.split("\n")
    assert Path(out[0]).parent == ROOT / "agent"
    assert Path(out[1]).parent == ROOT / "tui"
    assert out[2] == "None None"


def _without_torch(code: str, tmp_path: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", NO_TORCH + code], cwd=tmp_path, capture_output=True, text=True
    )


def test_cli_help_and_ls_work_without_torch(tmp_path):
    code = (
        "import sys\nfrom tvis.cli import main\n"
        "sys.argv=['tvis','ls','.']\nassert main(['ls', '.']) == 0\n"
        "assert 'torch' not in sys.modules\n"
        "try:\n    main(['--help'])\nexcept SystemExit as e:\n    assert e.code == 0\n"
    )
    result = _without_torch(code, tmp_path)
    assert result.returncode == 0, result.stderr


def test_run_without_torch_is_one_clear_sentence(tmp_path):
    (tmp_path / "train.py").write_text("print('hi')\n")
    code = "import sys\nfrom tvis.cli import main\nsys.exit(main(['run', 'train.py']))\n"
    result = _without_torch(code, tmp_path)
    assert result.returncode == 2
    assert "needs PyTorch" in result.stderr and "Traceback" not in result.stderr
