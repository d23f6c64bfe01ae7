"""The default project is the code the user wrote: the script's git work tree, and any
imported file outside installed packages and the standard library."""

from __future__ import annotations

import json
import os
import sysconfig

import torch
from support import run_tvis

from tvis.record.project import Project, default_root
from tvis.store.reader import RunReader, find_runs


def test_default_root_is_the_git_work_tree_above_the_script(tmp_path):
    script = tmp_path / "repo" / "projects" / "chargpt" / "train.py"
    script.parent.mkdir(parents=True)
    script.touch()
    assert default_root(script) == script.parent
    (tmp_path / "repo" / ".git").mkdir()
    assert default_root(script) == tmp_path / "repo"


def test_wide_project_takes_user_files_but_no_library(tmp_path):
    inside, outside = tmp_path / "root" / "a.py", tmp_path / "mylib" / "b.py"
    for f in (inside, outside):
        f.parent.mkdir()
        f.write_text("x = 1\n")
    library = os.path.join(sysconfig.get_paths()["stdlib"], "json", "__init__.py")
    wide, narrow = Project(tmp_path / "root", wide=True), Project(tmp_path / "root")
    assert wide.relpath(str(inside)) == narrow.relpath(str(inside)) == "a.py"
    assert wide.relpath(str(outside)) == os.path.realpath(outside)
    assert narrow.relpath(str(outside)) is None
    generated = tmp_path / "torchinductor_me" / "ab" / "cab.py"  # torch.compile's output
    generated.parent.mkdir(parents=True)
    generated.write_text("def call(args):\n    return args\n")
    for path in (library, torch.nn.functional.__file__, json.__file__, "<frozen os>", generated):
        assert wide.relpath(str(path)) is None


REPO_MODEL = """
import torch.nn as nn
import torch.nn.functional as F


def mix(x):
    return F.gelu(x)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        return self.fc(mix(x))
"""

REPO_SCRIPT = """
import os, sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
import torch
import torch.nn.functional as F
from mypkg.model import Net

model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(2):
    x, y = torch.randn(8, 4), torch.randint(0, 2, (8,))
    F.cross_entropy(model(x), y).backward()
    opt.step()
    opt.zero_grad()
"""


def _repo(tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / "mypkg").mkdir()
    (tmp_path / "mypkg" / "__init__.py").write_text("")
    (tmp_path / "mypkg" / "model.py").write_text(REPO_MODEL)
    script = tmp_path / "projects" / "demo" / "train.py"
    script.parent.mkdir(parents=True)
    script.write_text(REPO_SCRIPT)
    return script


def _functions(run_dir) -> set[str]:
    run = RunReader(run_dir)
    batch = run.batch(run.batch_ids()[0]).record
    return {c["name"] for c in batch["calls"] if c["kind"] == "function"}


def test_package_at_the_repo_root_is_traced_by_default(tmp_path):
    script = _repo(tmp_path)
    result = run_tvis("run", "--steps", "1", str(script), cwd=script.parent)
    assert result.returncode == 0, result.stderr
    (run_dir,) = find_runs(script.parent / "tvis_runs")  # runs stay beside the script
    assert "mix" in _functions(run_dir)
    assert "mypkg/model.py" in RunReader(run_dir).sources()


def test_project_flag_narrows_tracing_to_its_folder(tmp_path):
    script = _repo(tmp_path)
    out = tmp_path / "runs"
    result = run_tvis(
        "run", "--steps", "1", "--project", str(script.parent), "--out", str(out), str(script)
    )
    assert result.returncode == 0, result.stderr
    (run_dir,) = find_runs(out)
    assert "mix" not in _functions(run_dir)
