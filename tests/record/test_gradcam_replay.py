"""Grad-CAM from the kept samples' forward replayed alone: the maps it gives, against the
whole batch's graph, and a training run it never changes (RNG, buffers, attributes)."""

from __future__ import annotations

import copy

import numpy as np
import torch
import torch.nn.functional as F
from helpers import record_here
from insight_models import ConvNet, Stripes
from torch import nn

from tvis.record import gradcam
from tvis.store.reader import RunReader

FALLBACK = "Grad-CAM ran on the whole batch's graph"


class BNNet(nn.Module):
    """Conv, BatchNorm, ReLU twice and a linear head (samples mix in training mode)."""

    def __init__(self, classes: int = 4) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 12, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(12)
        self.head = nn.Linear(12, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.relu(self.bn2(self.conv2(F.max_pool2d(x, 2))))
        return self.head(x.mean(dim=(2, 3)))


class Noisy(BNNet):
    """Adds noise in its forward (no dropout module): a replay draws other noise."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x + 0.1 * torch.randn_like(x))


class Dropping(nn.Module):
    """Dropout between and after its convs (no BatchNorm: the batch's graph is exact)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.drop1 = nn.Dropout2d(0.3)
        self.conv2 = nn.Conv2d(8, 12, 3, padding=1)
        self.drop2 = nn.Dropout(0.5, inplace=True)
        self.head = nn.Linear(12, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.drop1(F.relu(self.conv1(x)))
        x = F.relu(self.conv2(F.max_pool2d(x, 2)))
        return self.head(self.drop2(x.mean(dim=(2, 3))))


class AlphaDropping(BNNet):
    def __init__(self) -> None:
        super().__init__()
        self.drop = nn.AlphaDropout(0.2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(self.drop(x))


class Stateful(BNNet):
    """A forward with side effects a replay must not leave behind: an attribute, a list
    and a buffer it updates in place."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[int] = []
        self.register_buffer("calls", torch.zeros((), dtype=torch.long))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.seen.append(x.shape[0])
        self.calls += 1
        out = super().forward(x)
        self.last = out
        return out


class Split(nn.Module):
    """Scores made by two root calls (a backbone, then a head)."""

    def __init__(self) -> None:
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU())
        self.head = nn.Linear(8, 4)


def _data(n: int = 8):
    data = Stripes()
    return data.images[:n], data.labels[:n]


def _record(model, tmp_path, steps: int = 2, **settings):
    losses: list[float] = []
    # One step more than the script runs: it ends on its own, after its last loss.
    outcome = record_here(
        lambda: _train(model, steps, losses), tmp_path, steps=steps + 1, **settings
    )
    run = RunReader(outcome.run_dir)
    return run, losses


def _plain(model, rng: torch.Tensor, steps: int = 2):
    torch.set_rng_state(rng)
    return _train(model, steps, [])


def _train(model, steps: int, losses: list[float]) -> list[float]:
    """SGD on the fixed data for ``steps`` steps, each loss appended to ``losses``."""
    x, y = _data()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(steps):
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def _notices(run) -> str:
    return " ".join(n["text"] for n in run.index()["notices"])


def _maps(run, batch: int = 0) -> dict:
    b = run.batch(batch)
    return {
        (c["layer"], c["which"]): (torch.from_numpy(np.array(b.array(c["tensor"]))), c)
        for c in b.record["gradcam"]
    }


def _full_batch_maps(model, x, y, layers, k: int) -> dict:
    """Today's fallback: the passes on the whole batch's training graph."""
    acts = {}
    hooks = [
        getattr(model, n).register_forward_hook(lambda m, a, out, n=n: acts.setdefault(n, out))
        for n in layers
    ]
    logits = model(x)
    for h in hooks:
        h.remove()
    targets = [acts[n] for n in layers]
    kept = [t[:k].detach() for t in targets]
    out = {}
    for which, cls in (("pred", logits[:k].argmax(1)), ("true", y[:k])):
        maps = gradcam._maps(logits, cls, targets, kept, retain=True)
        out.update({(n, which): m for n, m in zip(layers, maps, strict=True)})
    return out


def _frozen_textbook(model, x, y, layers, k: int) -> dict:
    """Grad-CAM of each kept sample alone (Selvaraju et al.), BatchNorm normalising with
    the whole batch's statistics as constants."""
    stats = {}

    def note(m, args) -> None:
        stats[m] = torch.var_mean(args[0].detach(), dim=(0, 2, 3), correction=0)

    hooks = [
        m.register_forward_pre_hook(note) for m in model.modules() if isinstance(m, nn.BatchNorm2d)
    ]
    model(x)
    for h in hooks:
        h.remove()
    for m, (var, mean) in stats.items():
        m.forward = lambda t, m=m, mean=mean, var=var: F.batch_norm(
            t, mean, var, m.weight, m.bias, False, 0.0, m.eps
        )
    acts = {}
    hooks = [
        getattr(model, n).register_forward_hook(lambda m, a, out, n=n: acts.setdefault(n, out))
        for n in layers
    ]
    logits = model(x)
    out = {}
    for which, cls in (("pred", logits.argmax(1)), ("true", y)):
        for n in layers:
            rows = []
            for i in range(k):
                (g,) = torch.autograd.grad(logits[i, cls[i]], acts[n], retain_graph=True)
                alpha = g[i].mean(dim=(1, 2))
                rows.append(torch.relu((alpha[:, None, None] * acts[n][i]).sum(0)))
            out[n, which] = torch.stack(rows).detach()
    return out


def test_replayed_maps_equal_full_batch_maps_without_batchnorm(tmp_path):
    torch.manual_seed(0)
    model = ConvNet()
    reference = copy.deepcopy(model)
    run, _ = _record(model, tmp_path, steps=1)
    assert FALLBACK not in _notices(run)  # the replay ran
    x, y = _data()
    expected = _full_batch_maps(reference, x, y, ["conv1", "conv2"], k=3)
    got = _maps(run)
    assert set(got) == set(expected)
    for key, (cam, entry) in got.items():
        assert not entry["approximate"]
        torch.testing.assert_close(cam, expected[key], rtol=1e-4, atol=1e-6)


def test_replayed_maps_with_batchnorm_are_each_samples_own(tmp_path):
    """With BatchNorm the maps are each sample's with the batch's statistics constant,
    exactly; the whole batch's graph (the fallback) also carries the other kept samples'
    scores and the gradient through the statistics: a few percent of the map here."""
    torch.manual_seed(0)
    model = BNNet()
    frozen, full = copy.deepcopy(model), copy.deepcopy(model)
    run, _ = _record(model, tmp_path, steps=1)
    assert FALLBACK not in _notices(run)
    x, y = _data()
    exact = _frozen_textbook(frozen, x, y, ["conv1", "conv2"], k=3)
    batch_graph = _full_batch_maps(full, x, y, ["conv1", "conv2"], k=3)
    for key, (cam, entry) in _maps(run).items():
        assert not entry["approximate"]
        torch.testing.assert_close(cam, exact[key], rtol=1e-4, atol=1e-6)
        other = batch_graph[key]
        gap = float((cam - other).norm() / other.norm())
        print(key, f"{gap:.3f}")
        assert 0 < gap < 0.5, (key, gap)


def test_training_bit_identical_with_batchnorm_replay(tmp_path):
    torch.manual_seed(0)
    model = BNNet()
    plain, rng = copy.deepcopy(model), torch.get_rng_state()
    run, losses = _record(model, tmp_path)
    assert FALLBACK not in _notices(run)
    assert "gradcam" in run.batch(1).record
    assert losses == _plain(plain, rng)
    for (name, p), q in zip(plain.state_dict().items(), model.state_dict().values(), strict=True):
        assert torch.equal(p, q), name  # parameters, running statistics, batch counts


def test_noise_in_forward_falls_back_and_leaves_rng_alone(tmp_path):
    torch.manual_seed(0)
    model = Noisy()
    plain, rng = copy.deepcopy(model), torch.get_rng_state()
    run, losses = _record(model, tmp_path)
    after = torch.rand(4)
    plain_losses = _plain(plain, rng)
    assert "gave other scores" in _notices(run)
    assert {c["which"] for c in run.batch(0).record["gradcam"]} >= {"pred"}
    assert losses == plain_losses
    assert torch.equal(after, torch.rand(4))  # the replay's noise came from a forked RNG
    for p, q in zip(plain.parameters(), model.parameters(), strict=True):
        assert torch.equal(p, q)


def test_dropout_replays_the_batchs_masks(tmp_path):
    torch.manual_seed(0)
    model = Dropping()
    plain, reference, rng = copy.deepcopy(model), copy.deepcopy(model), torch.get_rng_state()
    run, losses = _record(model, tmp_path)
    assert FALLBACK not in _notices(run)
    assert losses == _plain(plain, rng)
    for p, q in zip(plain.parameters(), model.parameters(), strict=True):
        assert torch.equal(p, q)
    torch.set_rng_state(rng)  # the first forward's masks again
    x, y = _data()
    expected = _full_batch_maps(reference, x, y, ["conv1", "conv2"], k=3)
    for key, (cam, entry) in _maps(run).items():
        assert not entry["approximate"]
        torch.testing.assert_close(cam, expected[key], rtol=1e-4, atol=1e-6)


def test_alpha_dropout_is_refused_up_front(tmp_path):
    torch.manual_seed(0)
    model = AlphaDropping()
    plain, rng = copy.deepcopy(model), torch.get_rng_state()
    run, losses = _record(model, tmp_path)
    assert losses == _plain(plain, rng)
    assert "alpha dropout" in _notices(run)
    assert all(c["approximate"] for c in run.batch(0).record["gradcam"])


def test_side_effects_of_the_replayed_forward_are_undone(tmp_path):
    torch.manual_seed(0)
    model = Stateful()
    plain, rng = copy.deepcopy(model), torch.get_rng_state()
    run, losses = _record(model, tmp_path)
    assert FALLBACK not in _notices(run)
    assert losses == _plain(plain, rng)
    assert model.seen == plain.seen == [8, 8]
    assert int(model.calls) == int(plain.calls) == 2
    assert model.last.shape[0] == 8
    for p, q in zip(plain.state_dict().values(), model.state_dict().values(), strict=True):
        assert torch.equal(p, q)


def test_scores_of_two_root_calls_fall_back(tmp_path):
    torch.manual_seed(0)
    model = Split()
    x, y = _data()

    def step():
        F.cross_entropy(model.head(model.backbone(x).mean(dim=(2, 3))), y).backward()

    outcome = record_here(step, tmp_path, steps=1)
    run = RunReader(outcome.run_dir)
    assert FALLBACK in _notices(run)  # the head, a root call of its own, made the scores
    assert run.batch(0).record["gradcam"]


def test_batch_statistics_saved_by_autograd_equal_those_of_the_input():
    """The replay reads BatchNorm's statistics off its autograd node (free), or else from
    its recorded input (a pass over it): both are the batch's."""
    from types import SimpleNamespace

    from tvis.record import gradcam_replay

    bn = nn.BatchNorm2d(5, eps=1e-3)
    x = torch.randn(6, 5, 4, 4, requires_grad=True) * 3 + 1
    y = bn(x)
    saved = gradcam_replay._saved_statistics(y.grad_fn, 5)
    call = SimpleNamespace(inputs=[{"tensor": 0}])
    read = gradcam_replay._statistics_of_input(SimpleNamespace(objects={0: x}), call, bn.eps)
    assert saved is not None
    for a, b in zip(saved, read, strict=True):
        torch.testing.assert_close(a, b)
    y.relu_()  # an in-place op after it: the output's node is no longer BatchNorm's
    assert gradcam_replay._saved_statistics(y.grad_fn, 5) is None


def test_replay_runs_under_the_autocast_of_the_model_call(tmp_path):
    torch.manual_seed(0)
    model = ConvNet()
    reference = copy.deepcopy(model)
    x, y = _data()

    def step():
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = model(x)
        F.cross_entropy(logits, y).backward()  # the loss outside autocast

    outcome = record_here(step, tmp_path, steps=1)
    run = RunReader(outcome.run_dir)
    assert FALLBACK not in _notices(run)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        expected = _full_batch_maps(reference, x, y, ["conv1", "conv2"], k=3)
    for key, (cam, entry) in _maps(run).items():
        # bfloat16 activations times gradients of the replay under autocast (bfloat16)
        assert run.batch(0).tensor(entry["tensor"])["dtype"] == "bfloat16"
        torch.testing.assert_close(cam.float(), expected[key].float(), rtol=0.02, atol=0.02)


@torch.compile(backend="eager")
def _doubled(x: torch.Tensor) -> torch.Tensor:
    return x * 2


class CompiledInside(ConvNet):
    """A forward that calls a compiled function: a replay that compiled it for another
    batch size (dynamic) could leave training running that code after."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(_doubled(x))


def test_compiled_code_runs_eagerly_in_the_replay(tmp_path):
    from torch._dynamo.utils import counters

    frames, runs = {}, {}
    for with_cam in (False, True):
        torch.manual_seed(0)
        model = CompiledInside()
        plain, rng = copy.deepcopy(model), torch.get_rng_state()
        torch._dynamo.reset()
        counters.clear()
        runs[with_cam], losses = _record(model, tmp_path / str(with_cam), gradcam=with_cam)
        frames[with_cam] = dict(counters["frames"])
        assert losses == _plain(plain, rng)
    assert frames[True] == frames[False]  # nothing compiled for the kept samples' size
    assert FALLBACK not in _notices(runs[True])
    assert runs[True].batch(0).record["gradcam"]


class Conditioned(ConvNet):
    """A forward with more than the batch: a per-sample mask (cut to the kept samples),
    a per-class bias and a number (passed as they are)."""

    def forward(self, x, mask=None, *, class_bias=None, temperature: float = 1.0):
        return (super().forward(x * mask) + class_bias) / temperature


def test_replay_cuts_batch_arguments_and_keeps_the_others(tmp_path):
    torch.manual_seed(0)
    model = Conditioned()
    reference = copy.deepcopy(model)
    x, y = _data()
    mask = (torch.rand(8, 1, 16, 16) > 0.2).float()
    bias = torch.tensor([0.5, -0.5, 0.0, 1.0])

    def step():
        F.cross_entropy(model(x, mask, class_bias=bias, temperature=2.0), y).backward()

    run = RunReader(record_here(step, tmp_path, steps=1).run_dir)
    assert FALLBACK not in _notices(run)
    acts = {}
    for n in ("conv1", "conv2"):
        getattr(reference, n).register_forward_hook(lambda m, a, o, n=n: acts.setdefault(n, o))
    logits = reference(x, mask, class_bias=bias, temperature=2.0)
    targets = [acts["conv1"], acts["conv2"]]
    maps = gradcam._maps(logits, logits[:3].argmax(1), targets, [t[:3] for t in targets], True)
    for (layer, which), (cam, _) in _maps(run).items():
        if which == "pred":
            expected = maps[0 if layer == "conv1" else 1].detach()
            torch.testing.assert_close(cam, expected, rtol=1e-4, atol=1e-6)


def test_the_replay_is_not_recorded(tmp_path):
    """tvis's hooks are paused during the replay: the batch has the same calls, lines
    and gradients with Grad-CAM as without."""
    records = {}
    for with_cam in (False, True):
        torch.manual_seed(0)
        run, _ = _record(BNNet(), tmp_path / str(with_cam), steps=1, gradcam=with_cam)
        records[with_cam] = run.batch(0).record
    on, off = records[True], records[False]
    assert [(c["name"], c["cls"]) for c in on["calls"]] == [
        (c["name"], c["cls"]) for c in off["calls"]
    ]
    assert len(on.get("lines") or []) == len(off.get("lines") or [])
    assert "gradcam" in on
