"""Parameter records: exact, compact, and light on memory."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from helpers import record_here
from torch import nn

from tvis.record import params as param_records
from tvis.store import codec
from tvis.store.reader import RunReader
from tvis.store.rounding import MANTISSA_BITS, round_mantissa


def _model() -> nn.Module:
    torch.manual_seed(0)
    # Sizes chosen so a small budget keeps some tensors whole and some as leading rows.
    return nn.Sequential(nn.Linear(32, 256), nn.Tanh(), nn.Linear(256, 64), nn.Linear(64, 3))


def _reference_hooks(opt: torch.optim.Optimizer, names: dict, seen: list) -> None:
    """Exact copies of every weight, gradient and Δw, taken by the test itself."""

    def pre(optimizer, args, kwargs):
        seen.append(
            {
                names[id(p)]: (p.detach().clone(), None if p.grad is None else p.grad.clone())
                for g in optimizer.param_groups
                for p in g["params"]
            }
        )

    def post(optimizer, args, kwargs):
        for g in optimizer.param_groups:
            for p in g["params"]:
                before, grad = seen[-1][names[id(p)]]
                seen[-1][names[id(p)]] = (before, grad, p.detach() - before)

    opt.register_step_pre_hook(pre)
    opt.register_step_post_hook(post)


def _train(model, opt, steps: int) -> None:
    torch.manual_seed(1)
    for _ in range(steps):
        x, y = torch.randn(8, 32), torch.randint(0, 3, (8,))
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()


def _region(t: torch.Tensor, kept: dict) -> np.ndarray:
    if kept["kept"] == "all":
        return t.numpy()
    if kept["kept"] == "rows":
        return t[: kept["count"]].numpy()
    return t.reshape(-1)[: kept["count"]].numpy()


@pytest.mark.parametrize("bits", [None, MANTISSA_BITS])
def test_weight_grad_and_update_reconstruct_bit_exactly_over_steps(tmp_path, bits):
    """Weights and Δw keep every bit; gradients too with --exact (``bits=None``), and are
    rounded to the run's mantissa bits otherwise, their statistics from exact values."""
    model = _model()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    names = {id(p): n for n, p in model.named_parameters()}
    seen: list = []
    _reference_hooks(opt, names, seen)
    steps = param_records.KEYFRAME + 2  # crosses a full copy of every weight
    outcome = record_here(
        lambda: _train(model, opt, 100),
        tmp_path,
        steps=steps,
        param_elems=6000,
        mantissa_bits=bits,
    )
    assert outcome.steps == steps
    run = RunReader(outcome.run_dir)
    assert _values_are_exact(run, seen, steps, bits) == {"all", "rows"}
    assert not any(  # Adam's updates are XOR-ed against the weight, as before format 5
        "predict" in run.step(i).tensor(p["update"])["value"]
        for i in range(steps)
        for p in run.step(i).record["params"]
    )
    later = run.step(1).tensor(run.step(1).record["params"][0]["weight"])["value"]
    assert later["base"] == {"step": 0, "param": "0.weight"}  # stored as a delta


def _values_are_exact(run: RunReader, seen: list, steps: int, bits: int | None) -> set:
    """Every stored weight, gradient and Δw against the training's own, bit for bit
    (gradients rounded to ``bits`` when given); the kinds of region seen."""
    kinds = set()
    for index in range(steps):
        step = run.step(index)
        for p in step.record["params"]:
            before, grad, update = seen[index][p["name"]]
            kept = p["kept"]
            kinds.add(kept["kept"])
            assert (p["grad"] is None) == (grad is None), (index, p["name"])
            for which, reference in (("weight", before), ("grad", grad), ("update", update)):
                if reference is None:
                    continue
                got = step.array(p[which])
                want = _region(reference, kept)
                value = step.tensor(p[which])["value"]
                if which == "grad" and bits is not None:
                    assert value["bits"] == bits
                    want = round_mantissa(np.ascontiguousarray(want), bits)
                else:
                    assert "bits" not in value
                assert got.dtype == want.dtype and got.shape == want.shape, (index, p["name"])
                assert got.tobytes() == want.tobytes(), (index, p["name"], which)
            if kept["kept"] == "all" and grad is not None:  # statistics of the exact gradient
                g_stats = step.tensor(p["grad"])["stats"]
                assert g_stats["max"] == float(grad.max()) and g_stats["min"] == float(grad.min())
    return kinds


SGD_VARIANTS = {
    "momentum_weight_decay": {"lr": 0.05, "momentum": 0.9, "weight_decay": 1e-4},
    "nesterov": {"lr": 0.05, "momentum": 0.9, "weight_decay": 5e-4, "nesterov": True},
    "dampening": {"lr": 0.1, "momentum": 0.5, "dampening": 0.3},
    "maximize": {"lr": 0.01, "momentum": 0.9, "maximize": True},
    "no_momentum": {"lr": 0.1, "weight_decay": 1e-3},
}


@pytest.mark.parametrize("bits", [None, MANTISSA_BITS])
@pytest.mark.parametrize("variant", sorted(SGD_VARIANTS))
def test_sgd_updates_stored_against_sgds_prediction_read_back_bit_exactly(tmp_path, variant, bits):
    """Format 5: SGD's Δw is XOR-ed against SGD's own prediction from the stored weight,
    gradient (rounded) and previous Δw. Read back, every bit is the training's, with the
    learning rate changed by a scheduler every step, a parameter left without a gradient
    on one step, parameters kept as leading rows only, and a full copy of the weights
    crossed; and each predicted Δw takes fewer bytes than the XOR against the weight."""
    model = _model()
    opt = torch.optim.SGD(model.parameters(), **SGD_VARIANTS[variant])
    schedule = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.8)
    names = {id(p): n for n, p in model.named_parameters()}
    seen: list = []
    _reference_hooks(opt, names, seen)

    def train():
        torch.manual_seed(1)
        for i in range(100):
            x, y = torch.randn(8, 32), torch.randint(0, 3, (8,))
            opt.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            if i == 2:
                model[3].bias.grad = None  # SGD steps over it: Δw 0, its buffer unchanged
            opt.step()
            schedule.step()

    steps = param_records.KEYFRAME + 3
    outcome = record_here(train, tmp_path, steps=steps, param_elems=6000, mantissa_bits=bits)
    assert outcome.steps == steps
    run = RunReader(outcome.run_dir)
    assert _values_are_exact(run, seen, steps, bits) == {"all", "rows"}
    predicted = with_history = 0
    for index in range(steps):
        step = run.step(index)
        for p in step.record["params"]:
            value = step.tensor(p["update"])["value"]
            if "predict" not in value:
                continue
            predicted += 1
            how = value["predict"]
            assert how["lr"] == pytest.approx(SGD_VARIANTS[variant]["lr"] * 0.8**index)
            if "prev" in how:
                with_history += 1
                assert how["prev"]["step"] == index - 1
            before, _, update = seen[index][p["name"]]
            after = _region(before + update, p["kept"])
            plain = codec.encode(after, _region(before, p["kept"]))
            assert value["nbytes"] < plain.nbytes, (index, p["name"])
    params = len(run.step(0).record["params"])
    assert predicted >= steps * params * 3 // 4
    if SGD_VARIANTS[variant].get("momentum"):
        assert with_history >= (steps - 3) * params * 3 // 4


def test_partly_kept_parameter_has_whole_statistics_and_estimated_update_norm(tmp_path):
    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    names = {id(p): n for n, p in model.named_parameters()}
    seen: list = []
    _reference_hooks(opt, names, seen)
    outcome = record_here(lambda: _train(model, opt, 100), tmp_path, steps=1, param_elems=6000)
    step = RunReader(outcome.run_dir).step(0)
    big = next(p for p in step.record["params"] if p["name"] == "0.weight")
    assert big["kept"]["kept"] == "rows"
    before, grad, update = seen[0]["0.weight"]
    w_stats = step.tensor(big["weight"])["stats"]
    assert w_stats["numel"] == before.numel()
    assert np.isclose(w_stats["norm"], float(before.norm()), rtol=1e-5)
    g_stats = step.tensor(big["grad"])["stats"]
    assert np.isclose(g_stats["norm"], float(grad.norm()), rtol=1e-5)
    assert big["norms"]["estimated"] is True
    # SGD moves every element by lr * grad: the sample's estimate is close, not exact.
    assert np.isclose(big["norms"]["update"], float(update.norm()), rtol=0.1)


def test_closure_optimizer_step_records_the_closure_gradients(tmp_path):
    torch.manual_seed(0)
    model = nn.Linear(4, 1)
    opt = torch.optim.LBFGS(model.parameters(), lr=0.5, max_iter=3)
    x, y = torch.randn(16, 4), torch.randn(16, 1)
    first: dict = {}

    def closure():
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        first.setdefault("grad", model.weight.grad.detach().clone())
        return loss

    outcome = record_here(lambda: [opt.step(closure) for _ in range(5)], tmp_path, steps=1)
    step = RunReader(outcome.run_dir).step(0)
    weight = next(p for p in step.record["params"] if p["name"] == "weight")
    assert weight["grad"] is not None
    want = round_mantissa(first["grad"].numpy(), MANTISSA_BITS)
    assert step.array(weight["grad"]).tobytes() == want.tobytes()


def test_plan_keeps_small_tensors_whole_and_every_tensor_some_rows():
    params = [torch.zeros(1000, 1000), torch.zeros(10), torch.zeros(300, 10), torch.zeros(50)]
    keep = param_records.plan(params, 20_000)
    assert keep[id(params[1])] == 10 and keep[id(params[3])] == 50
    assert keep[id(params[2])] == 3000
    assert 1000 <= keep[id(params[0])] <= 20_000 and keep[id(params[0])] % 1000 == 0
    assert sum(keep.values()) <= 20_000


def test_model_of_40m_parameters_records_under_100_mb(tmp_path):
    torch.manual_seed(0)
    model = nn.Sequential(*[nn.Linear(2048, 2048) for _ in range(10)])
    assert sum(p.numel() for p in model.parameters()) >= 40_000_000
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)

    def train():
        for _ in range(100):
            opt.zero_grad()
            model(torch.randn(4, 2048)).square().mean().backward()
            opt.step()

    outcome = record_here(train, tmp_path, steps=3)
    assert outcome.steps == 3 and outcome.status == "complete"
    assert outcome.bytes < 100 * 2**20
    step = RunReader(outcome.run_dir).step(2)
    assert all(p["kept"] is not None for p in step.record["params"])  # nothing dropped


def test_agent_decodes_a_weight_stored_as_a_delta_of_the_previous_step(tmp_path):
    from tvis.agent.api import AgentAPI

    model = _model()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    names = {id(p): n for n, p in model.named_parameters()}
    seen: list = []
    _reference_hooks(opt, names, seen)
    outcome = record_here(lambda: _train(model, opt, 100), tmp_path, steps=2)
    api = AgentAPI(outcome.run_dir.parent)
    run = outcome.run_dir.name
    reply = api.array(run, tensor=api.step(run, 1)["params"][2]["update"], step=1)
    name = api.step(run, 1)["params"][2]["name"]
    assert reply["array"].tobytes() == seen[1][name][2].numpy().tobytes()
    view = api.param(run, 1, name, which="weight")
    assert view["name"] == name and view["array"].size > 0


def test_sgd_prediction_of_float64_and_scalar_parameters_reads_back_exactly(tmp_path):
    """The prediction in the parameter's own dtype (float64 here); a 0-d parameter (whose
    one element compresses to the same bytes either way) and a float16 one (stored
    widened to float32, and predicted there) read back exactly too."""
    torch.manual_seed(0)
    w64 = nn.Parameter(torch.randn(40, 7, dtype=torch.float64))
    scale = nn.Parameter(torch.tensor(1.5))
    half = nn.Parameter(torch.randn(16, dtype=torch.float16))
    opt = torch.optim.SGD([w64, scale, half], lr=0.05, momentum=0.9, weight_decay=1e-3)
    names = {id(w64): "param0", id(scale): "param1", id(half): "param2"}  # no module
    seen: list = []
    _reference_hooks(opt, names, seen)

    def train():
        torch.manual_seed(1)
        for _ in range(10):
            opt.zero_grad()
            x = torch.randn(7, dtype=torch.float64)
            loss = (w64 @ x).square().mean() * scale + half.float().square().sum()
            loss.backward()
            opt.step()

    outcome = record_here(train, tmp_path, steps=3)
    run = RunReader(outcome.run_dir)
    for index in range(3):
        step = run.step(index)
        for p in step.record["params"]:
            before, _, update = seen[index][p["name"]]
            value = step.tensor(p["update"])["value"]
            if p["name"] == "param0":
                assert "predict" in value, index
            for which, want in (("weight", before), ("update", update)):
                got = step.array(p[which])
                assert got.tobytes() == want.numpy().astype(got.dtype).tobytes(), (index, p)


class _MySGD(torch.optim.SGD):
    """A subclass may step differently: its Δw is not predicted."""


def test_sgd_subclass_and_sparse_gradients_keep_dw_against_the_weight(tmp_path):
    torch.manual_seed(0)
    emb = nn.Embedding(50, 8, sparse=True)
    lin = nn.Linear(8, 2)
    sparse_opt = torch.optim.SGD(emb.parameters(), lr=0.1)
    sub_opt = _MySGD(lin.parameters(), lr=0.1, momentum=0.9)

    def train():
        torch.manual_seed(1)
        for _ in range(10):
            sparse_opt.zero_grad()
            sub_opt.zero_grad()
            lin(emb(torch.randint(0, 50, (4,)))).square().mean().backward()
            sparse_opt.step()
            sub_opt.step()

    outcome = record_here(train, tmp_path, steps=2)
    run = RunReader(outcome.run_dir)
    seen = 0
    for index in run.step_ids():
        step = run.step(index)
        for p in step.record["params"]:
            if p["kept"] is not None:
                seen += 1
                assert "predict" not in step.tensor(p["update"])["value"], (index, p["name"])
                assert step.array(p["update"]) is not None
    assert seen >= 3
