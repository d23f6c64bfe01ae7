"""Outputs tvis cannot read densely (sparse, nested, quantized, meta) are recorded as not
captured, with their shape, and never under another tensor's values."""

from __future__ import annotations

import warnings
from pathlib import Path

import torch
from torch import nn

from tvis.record.builder import Settings
from tvis.record.runner import record
from tvis.store.reader import RunReader
from tvis.tui.widgets.tensor_card import TensorRef, why_no_picture

HERE = Path(__file__).resolve().parent


class Odd(nn.Module):
    """Returns one kind of tensor tvis has no dense values for."""

    def __init__(self, kind: str) -> None:
        super().__init__()
        self.kind = kind

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.kind == "sparse":
            return (x * 2).to_sparse()
        if self.kind == "csr":
            return x.to_sparse_csr()
        if self.kind == "nested":
            return torch.nested.nested_tensor([x[0], x[1, :2]])
        if self.kind == "quantized":
            return torch.quantize_per_tensor(x, 0.1, 0, torch.quint8)
        return torch.empty(3, 4, device="meta")


KINDS = {
    "sparse": ("sparse COO", [3, 4]),
    "csr": ("sparse CSR", [3, 4]),
    "nested": ("nested (2 tensors: 4, 2)", [2]),
    "quantized": ("quantized", [3, 4]),
    "meta": ("meta (no data)", [3, 4]),
}


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.odd = nn.ModuleDict({kind: Odd(kind) for kind in KINDS})

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.lin(x)
        for odd in self.odd.values():
            odd(h.detach())
        return h


def _train() -> None:
    torch.manual_seed(0)
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(2):
        loss = model(torch.randn(3, 4)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()


def test_uncapturable_outputs_are_marked_not_captured_with_their_shape(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's beta/prototype warnings for these layouts
        outcome = record(_train, Settings(steps=2), HERE, tmp_path / "run")
    assert outcome.status == "complete"
    record_ = RunReader(outcome.run_dir).batch(0).record
    entries = record_["tensors"]
    assert [e["id"] for e in entries] == list(range(len(entries)))  # ids are positions
    by_name = {c["name"]: c for c in record_["calls"]}
    seen = set()
    for kind, (reason, shape) in KINDS.items():
        (out,) = by_name[f"odd.{kind}"]["outputs"]
        entry = entries[out["tensor"]]
        assert entry["not_captured"] == reason
        assert entry["shape"] == shape and entry["value"] is None
        assert out["tensor"] not in seen  # no two calls share an entry
        seen.add(out["tensor"])
    sparse = entries[by_name["odd.sparse"]["outputs"][0]["tensor"]]
    ref = TensorRef("out", sparse, "run", batch=0)
    assert why_no_picture(ref, sparse) == "not captured: sparse COO"  # what the inspector says
    lin_out = entries[by_name["lin"]["outputs"][0]["tensor"]]
    assert "not_captured" not in lin_out and lin_out["value"] is not None
    assert not any("tvis failed" in n for n in outcome.notices)


def test_a_notice_from_a_torch_error_is_one_line(tmp_path):
    from tvis.record.builder import first_line

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        quantized = torch.quantize_per_tensor(torch.ones(2), 0.1, 0, torch.quint8)
    try:
        quantized.sum()
    except (RuntimeError, NotImplementedError) as e:
        error = e
    assert len(str(error).splitlines()) > 20  # torch lists every dispatcher backend
    assert "\n" not in first_line(error) and len(first_line(error)) <= 160
