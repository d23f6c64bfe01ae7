"""Grad-CAM: exact against a textbook computation, and training untouched by it."""

from __future__ import annotations

import copy
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from helpers import record_here
from insight_models import Stripes, conv_setup, train_classifier
from torch import nn

from tvis.store.reader import RunReader

TVIS = str(Path(sys.executable).with_name("tvis"))


def _textbook(model, x, y, layers, samples: int) -> dict:
    """Grad-CAM per sample, one class score at a time (Selvaraju et al.): the channel
    weights are the spatial mean of d score / d A, the map is ReLU(Σ_k α_k A_k)."""
    acts = {}
    hooks = [
        getattr(model, name).register_forward_hook(
            lambda m, a, out, n=name: acts.setdefault(n, out)
        )
        for name in layers
    ]
    logits = model(x)
    for h in hooks:
        h.remove()
    classes = {"pred": logits.argmax(1), "true": y}
    maps = {}
    for which, cls in classes.items():
        for name in layers:
            rows = []
            for i in range(samples):
                (g,) = torch.autograd.grad(logits[i, cls[i]], acts[name], retain_graph=True)
                alpha = g[i].mean(dim=(1, 2))
                rows.append(torch.relu((alpha[:, None, None] * acts[name][i]).sum(0)))
            maps[name, which] = torch.stack(rows).detach()
    return maps


def test_gradcam_equals_textbook_computation_on_a_copy(tmp_path):
    torch.manual_seed(0)
    model, _, _ = conv_setup()
    reference = copy.deepcopy(model)
    data = Stripes()
    x, y = data.images[:8], data.labels[:8]

    def step():
        F.cross_entropy(model(x), y).backward()

    outcome = record_here(step, tmp_path, steps=1, samples=3)
    batch = RunReader(outcome.run_dir).batch(0)
    cams = batch.record["gradcam"]
    expected = _textbook(reference, x, y, ["conv1", "conv2"], samples=3)
    assert {(c["layer"], c["which"]) for c in cams} == set(expected)
    for cam in cams:
        recorded = torch.from_numpy(np.array(batch.array(cam["tensor"])))
        assert not cam["approximate"]  # no BatchNorm: every sample's map is its own
        torch.testing.assert_close(recorded, expected[cam["layer"], cam["which"]])
    info = RunReader(outcome.run_dir).index()["data"]["insights"]
    assert info["gradcam"] == ["conv1", "conv2"]


def _trained(tmp_path=None, **settings):
    model, opt, loader = conv_setup(seed=1)
    if tmp_path is None:
        train_classifier(model, opt, loader, 2)
        return model, None
    outcome = record_here(
        lambda: train_classifier(model, opt, loader, 100), tmp_path, steps=2, **settings
    )
    return model, outcome


def test_training_bit_identical_with_gradcam(tmp_path):
    plain, _ = _trained()
    recorded, outcome = _trained(tmp_path)
    assert "gradcam" in RunReader(outcome.run_dir).batch(1).record
    for (name, p), q in zip(plain.named_parameters(), recorded.parameters(), strict=True):
        assert torch.equal(p, q), name
        assert torch.equal(p.grad, q.grad), name  # the extra pass never wrote .grad


def test_gradcam_setting_off_skips_it(tmp_path):
    plain, _ = _trained()
    recorded, outcome = _trained(tmp_path, gradcam=False)
    assert "gradcam" not in RunReader(outcome.run_dir).batch(0).record
    for p, q in zip(plain.parameters(), recorded.parameters(), strict=True):
        assert torch.equal(p, q)


SCRIPT = """
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 6, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(2):
        loss = F.cross_entropy(model(torch.randn(4, 3, 8, 8)), torch.tensor([0, 1, 2, 0]))
        opt.zero_grad()
        loss.backward()
        opt.step()
"""


def test_no_gradcam_flag_of_tvis_run(tmp_path):
    (tmp_path / "train.py").write_text(textwrap.dedent(SCRIPT))
    runs = {}
    for flags in ([], ["--no-gradcam"]):
        out = tmp_path / ("off" if flags else "on")
        result = subprocess.run(
            [TVIS, "run", "--steps", "1", "--out", str(out), *flags, "train.py"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert result.returncode == 0, result.stderr
        (runs[bool(flags)],) = out.iterdir()
    assert "gradcam" in RunReader(runs[False]).batch(0).record
    assert "gradcam" not in RunReader(runs[True]).batch(0).record


class PatchStem(nn.Module):
    """A ViT-style patch embedding (kernel = stride) under an ordinary 3x3 conv."""

    def __init__(self, conv_after: bool) -> None:
        super().__init__()
        self.patch = nn.Conv2d(3, 8, kernel_size=4, stride=4)
        self.conv = nn.Conv2d(8, 8, 3, padding=1) if conv_after else nn.Identity()
        self.head = nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.conv(self.patch(x)).mean(dim=(2, 3)))


def test_patch_embeddings_are_not_gradcam_layers(tmp_path):
    data = Stripes()
    x, y = data.images[:8], data.labels[:8]
    for conv_after in (True, False):
        torch.manual_seed(0)
        model = PatchStem(conv_after)
        out = tmp_path / str(conv_after)
        step = lambda model=model: F.cross_entropy(model(x), y).backward()  # noqa: E731
        outcome = record_here(step, out, steps=1)
        run = RunReader(outcome.run_dir)
        batch = run.batch(0).record
        patch = next(c for c in batch["calls"] if c["name"] == "patch")
        assert "patch_embedding" in patch["flags"]
        layers = {c["layer"] for c in batch.get("gradcam", [])}
        notices = " ".join(n["text"] for n in run.index()["notices"])
        if conv_after:
            assert layers == {"conv"}
        else:
            assert not layers and "patch embeddings" in notices
