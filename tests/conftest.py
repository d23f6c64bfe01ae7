"""Fixtures shared by every room's tests (plain helpers live in support.py)."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from support import EXAMPLES, run_tvis


@pytest.fixture(scope="session")
def recorded_run(tmp_path_factory) -> Path:
    """A run recorded from the image-classifier example (2 steps, in-process workers)."""
    out = tmp_path_factory.mktemp("runs")
    script = EXAMPLES / "image_classifier" / "train.py"
    # --project: the example's own folder, as a user's script folder outside any repository
    # (inside this one, files would be named from the repository root).
    project = str(script.parent)
    result = run_tvis(
        "run",
        "--steps",
        "2",
        "--out",
        str(out),
        "--project",
        project,
        str(script),
        "--workers",
        "0",
        cwd=out,
    )
    assert result.returncode == 0, result.stderr
    (run,) = [p for p in out.iterdir() if p.is_dir()]
    return run


@pytest.fixture(scope="session")
def ddp_recording(tmp_path_factory) -> SimpleNamespace:
    """A 2-rank DDP script (DistributedSampler, an unused parameter) run by plain `torchrun`
    and by `torchrun -m tvis run --steps 3`: ``group`` (the recording), ``plain`` and
    ``recorded`` (each rank's journal of loss and parameter digest per step), ``result``."""
    from ranks_support import torchrun

    work = tmp_path_factory.mktemp("ddp")
    script_args = ["--unused", "--steps", "5"]
    plain = torchrun("plain", [], [*script_args[:1], "--steps", "3", "--journal", "plain"], work)
    assert plain.returncode == 0, plain.stderr
    result = torchrun(
        "module", ["--steps", "3", "--out", "runs"], [*script_args, "--journal", "rec"], work
    )
    assert result.returncode == 0, result.stderr
    (group,) = [p for p in (work / "runs").iterdir() if p.is_dir()]
    return SimpleNamespace(
        group=group, plain=work / "plain", recorded=work / "rec", result=result, root=work
    )


@pytest.fixture(autouse=True)
def no_tvis_left_installed():
    """Invariant 6: after every test, no hook, patch or mode of tvis is left in torch."""
    yield
    if sys.version_info >= (3, 12):  # the call hook's other backend: a sys.monitoring tool id
        held = [sys.monitoring.get_tool(tool) for tool in range(6)]
        assert "tvis" not in held, "tvis left a sys.monitoring tool id in use"
    torch = sys.modules.get("torch")
    if torch is None or "tvis.record.session" not in sys.modules:
        return
    from torch.nn.modules import module as nn_module
    from torch.optim import optimizer as optim_module
    from torch.utils.data import dataloader

    leftovers = {
        "module forward pre-hooks": nn_module._global_forward_pre_hooks,
        "module forward hooks": nn_module._global_forward_hooks,
        "optimizer pre-hooks": optim_module._global_optimizer_pre_hooks,
        "optimizer post-hooks": optim_module._global_optimizer_post_hooks,
    }
    for what, hooks in leftovers.items():
        assert not hooks, f"tvis left {what} installed"
    patched = {
        "torch.autograd.backward": torch.autograd.backward,
        "DataLoader._get_iterator": dataloader.DataLoader._get_iterator,
        "_BaseDataLoaderIter.__next__": dataloader._BaseDataLoaderIter.__next__,
        "Optimizer.__init__": torch.optim.Optimizer.__init__,
    }
    for what, fn in patched.items():
        assert getattr(fn, "__module__", None) or "", f"{what} is still patched"
        assert not fn.__module__.startswith("tvis"), f"{what} is still patched by tvis"
    assert torch._C._len_torch_function_stack() == 0, "a torch function mode is still active"
    assert sys.gettrace() is None or "tvis" not in repr(sys.gettrace()), "tracer left installed"
    assert not sys.gettrace.__module__.startswith("tvis"), "sys.gettrace is still patched"
