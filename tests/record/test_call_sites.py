"""Call sites: each recorded call points at the line of project code that made it."""

from __future__ import annotations

import importlib.util
import sys
import textwrap

import torch

from tvis.record.builder import Settings
from tvis.record.runner import record
from tvis.store.reader import RunReader

# The script whose line numbers the test reads back (line 1 is ``import torch``).
SCRIPT = textwrap.dedent(
    """\
    import torch
    import torch.nn.functional as F


    def centre(t):
        return t - t.mean()


    def head(t):
        return centre(t) * 2.0


    def train_step(model, x, y):
        logits = head(model(x))
        loss = F.cross_entropy(logits, y)
        loss.backward()


    def main(model, x, y):
        train_step(model, x, y)
    """
)


def _record_script(tmp_path):
    path = tmp_path / "project" / "sites.py"
    path.parent.mkdir()
    path.write_text(SCRIPT)
    spec = importlib.util.spec_from_file_location("tvis_test_sites", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
        torch.manual_seed(0)
        model = torch.nn.Linear(4, 3)
        x, y = torch.randn(5, 4), torch.tensor([0, 1, 2, 0, 1])
        outcome = record(
            lambda: module.main(model, x, y), Settings(steps=1), path.parent, tmp_path / "run"
        )
    finally:
        del sys.modules[spec.name]
    calls = RunReader(outcome.run_dir).batch(0).record["calls"]
    return {c["name"]: c for c in calls}


def test_loss_call_site_is_the_loss_line_not_the_callers(tmp_path):
    calls = _record_script(tmp_path)
    assert calls["F.cross_entropy"]["site"] == ["sites.py", 15]


def test_nested_project_call_sites_are_their_own_lines(tmp_path):
    calls = _record_script(tmp_path)
    assert calls["head"]["site"] == ["sites.py", 14]
    assert calls["centre"]["site"] == ["sites.py", 10]
    module_call = next(c for c in calls.values() if c["kind"] == "module")
    assert module_call["site"] == ["sites.py", 14]
