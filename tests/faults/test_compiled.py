"""Under torch.compile, Dynamo never traces tvis: no extra graphs or recompiles, and
training stays bit-identical to a plain compiled run."""

from __future__ import annotations

import warnings
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from tvis.record.builder import Settings
from tvis.record.runner import record
from tvis.store.reader import RunReader

HERE = Path(__file__).resolve().parent


def _train(log: list) -> nn.Module:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Dropout(0.1), nn.Linear(16, 3))
    compiled = torch.compile(model, backend="aot_eager")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(5):
        x, y = torch.randn(4, 8), torch.randint(0, 3, (4,))
        loss = F.cross_entropy(compiled(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        log.append(loss.detach())
    return model


def _graphs_compiled(fn) -> int:
    return _compiled(fn)["graphs"]


def _compiled(fn) -> dict:
    """What Dynamo compiled while ``fn`` ran: graphs, the functions whose frames it
    compiled, and graph breaks. (Its count of frames also counts frames it looked at and
    left alone, which other tests of the same process can add: not what is asked here.)"""
    from torch._dynamo.convert_frame import register_bytecode_hook
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    frames: list[str] = []
    handle = register_bytecode_hook(lambda code, new: frames.append(code.co_name))
    try:
        fn()
    finally:
        handle.remove()
    return {
        "graphs": counters["stats"]["unique_graphs"],
        "frames": frames,
        "breaks": sum(counters["graph_break"].values()),
    }


@torch.compile(backend="aot_eager")
def _fused_gelu(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return F.gelu(x @ w) * 2


class _WithCompiledHelper(nn.Module):
    """A project forward that calls a compiled function, as fused helpers are written."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.randn(8, 8))
        self.out = nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(_fused_gelu(x, self.w))


def _train_with_helper(log: list) -> None:
    torch.manual_seed(0)
    model = _WithCompiledHelper()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(4):
        x, y = torch.randn(4, 8), torch.randint(0, 3, (4,))
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        log.append(loss.detach())


def test_a_compiled_function_in_a_forward_compiles_what_a_plain_run_compiles(tmp_path):
    # While it runs, Dynamo compiles every Python frame that starts: tvis's trace callbacks
    # and statistics were 27 graphs, 78 frames and 39 graph breaks before they were marked.
    plain_log: list = []
    plain = _compiled(lambda: _train_with_helper(plain_log))
    log: list = []
    outcomes: list = []
    recorded = _compiled(
        lambda: outcomes.append(
            record(lambda: _train_with_helper(log), Settings(steps=3), HERE, tmp_path / "run")
        )
    )
    assert recorded == plain == {"graphs": 1, "frames": ["_fused_gelu"], "breaks": 0}
    assert [float(v) for v in log] == [float(v) for v in plain_log[: len(log)]]
    (outcome,) = outcomes
    calls = RunReader(outcome.run_dir).batch(0).record["calls"]
    assert "_fused_gelu" in {c["name"] for c in calls}  # still seen, at its boundary


def test_compiled_training_bit_identical_without_recompiles_when_recorded(tmp_path):
    plain_log: list = []
    models: list = []
    plain_graphs = _graphs_compiled(lambda: models.append(_train(plain_log)))
    log: list = []
    outcomes: list = []
    graphs = _graphs_compiled(
        lambda: outcomes.append(
            record(
                lambda: models.append(_train(log)),
                Settings(steps=10),
                HERE,
                tmp_path / "run",
            )
        )
    )
    assert graphs == plain_graphs  # tvis added no graph and no recompile
    assert [float(v) for v in log] == [float(v) for v in plain_log]
    for p, q in zip(models[0].parameters(), models[1].parameters(), strict=True):
        assert torch.equal(p, q)
    (outcome,) = outcomes
    assert outcome.steps == 5
    calls = RunReader(outcome.run_dir).batch(0).record["calls"]
    assert calls[0]["cls"] == "OptimizedModule"  # the compiled region, seen at its boundary


def test_compiled_module_gets_no_global_hooks_warning_from_tvis(tmp_path):
    # A plain run has no global module hooks, so torch says nothing; tvis's are its own.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        outcome = record(lambda: _train([]), Settings(steps=3), HERE, tmp_path / "run")
    assert outcome.status == "complete"
    assert not [w for w in caught if "global hooks" in str(w.message)]
    assert not [f for f in warnings.filters if "global hooks" in str(f[1])]  # filter removed
