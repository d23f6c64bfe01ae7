"""A small run written with the store's RunWriter, following tvis/store/format.py.

It stands in for a recorded example run and holds the cases the agent must handle: an
image batch normalized with mean/std, conv maps with gradients, NaN and Inf values, a
sequence-first tensor (batch dim 1), a tensor kept for its first samples only, one kept as
stats only, per-line annotations, two batches and one optimizer step.
"""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tvis.store.format import COMPLETE
from tvis.store.writer import RunWriter

BATCH = 4
MEAN, STD = [0.5, 0.4, 0.3], [0.25, 0.2, 0.1]
TARGETS, PER_SAMPLE = [3, 0, 9, 1], [2.0, 2.5, 1.5, 3.2]
CLASSES = ["circle", "square", "triangle", "star", "cross", "ring", "bar", "dot", "arc", "wave"]
SOURCE = "\n".join(f"line {i}" for i in range(1, 41)) + "\n"


@dataclass(frozen=True)
class SyntheticRun:
    """Where the run is and the ids a test needs to ask for its parts."""

    root: Path
    name: str  # the run's path relative to root, as clients name it
    image: int  # [B, 3, 16, 16] normalized input
    conv: int  # [B, 8, 16, 16] with a gradient
    relu: int  # holds NaN and Inf
    seq: int  # [5, B, 6], batch_dim 1
    capped: int  # [B, 8, 16, 16] kept for the first 2 samples
    stats_only: int  # values not kept
    logits: int  # [B, 10] with a gradient
    conv_call: int
    model_call: int
    pixels: np.ndarray  # the un-normalized image batch, [B, 3, 16, 16] in [0, 1]

    @property
    def path(self) -> Path:
        return self.root / self.name


def stats(a: np.ndarray) -> dict:
    a = np.asarray(a, dtype=np.float64)
    finite = a[np.isfinite(a)]
    return {
        "numel": int(a.size),
        "mean": float(finite.mean()) if finite.size else float("nan"),
        "std": float(finite.std()) if finite.size else float("nan"),
        "min": float(finite.min()) if finite.size else float("nan"),
        "max": float(finite.max()) if finite.size else float("nan"),
        "absmean": float(np.abs(finite).mean()) if finite.size else float("nan"),
        "norm": float(np.sqrt((finite**2).sum())),
        "zeros": float((a == 0).mean()) if a.size else 0.0,
        "nan": int(np.isnan(a).sum()),
        "inf": int(np.isinf(a).sum()),
    }


def hist(a: np.ndarray) -> dict:
    finite = np.asarray(a, dtype=np.float64)
    finite = finite[np.isfinite(finite)]
    lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 0.0)
    counts, _ = np.histogram(finite, bins=32, range=(lo, hi if hi > lo else lo + 1))
    return {"lo": lo, "hi": hi, "counts": counts.tolist()}


class _Tensors:
    """Collects tensor entries and their values for one batch or step."""

    def __init__(self) -> None:
        self.entries: list[dict] = []
        self.arrays: dict[int, np.ndarray] = {}

    def add(
        self,
        full: np.ndarray,
        batch_dim: int | None = 0,
        keep: str = "all",
        count: int | None = None,
        of: int | None = None,
    ) -> int:
        tid = len(self.entries)
        entry = {
            "id": tid,
            "shape": list(full.shape),
            "dtype": str(full.dtype),
            "device": "cpu",
            "stats": stats(full),
            "hist": hist(full),
            "value": None,
            "batch_dim": batch_dim,
            "batch_dim_inferred": False,
            "grad": None,
            "of": of,
        }
        if keep == "samples":
            self.arrays[tid] = np.take(full, range(count), axis=batch_dim)
            entry["value"] = {"kept": "samples", "count": count}
        elif keep == "all":
            self.arrays[tid] = full
        self.entries.append(entry)
        if of is not None:
            self.entries[of]["grad"] = tid
        return tid


def _call(cid, parent, depth, kind, name, cls, inputs, outputs, t0, fwd, bwd):
    return {
        "id": cid,
        "parent": parent,
        "depth": depth,
        "kind": kind,
        "name": name,
        "cls": cls,
        "phase": "loss" if kind == "loss" else "forward",
        "def": ["model.py", 3 + cid],
        "site": ["train.py", 20 + cid],
        "inputs": [{"name": "x", "tensor": t} for t in inputs] + [{"name": "dim", "repr": "1"}],
        "outputs": [{"name": "out", "tensor": t} for t in outputs],
        "t0": t0,
        "fwd_ms": fwd,
        "bwd_ms": bwd,
        "no_grad": False,
        "flags": [],
    }


def _batch(index: int, rng: np.random.Generator) -> tuple[dict, dict[int, np.ndarray], dict]:
    t = _Tensors()
    pixels = rng.random((BATCH, 3, 16, 16), dtype=np.float32)
    normalized = (pixels - np.array(MEAN, np.float32)[:, None, None]) / np.array(STD, np.float32)[
        :, None, None
    ]
    image = t.add(normalized.astype(np.float32))
    conv_out = rng.standard_normal((BATCH, 8, 16, 16)).astype(np.float32)
    conv = t.add(conv_out)
    t.add((conv_out * 0.01).astype(np.float32), of=conv)
    relu_out = np.maximum(conv_out, 0)
    relu_out[0, 0, 0, 0] = np.nan
    relu_out[0, 0, 0, 1] = np.inf
    relu = t.add(relu_out)
    seq = t.add(rng.standard_normal((5, BATCH, 6)).astype(np.float32), batch_dim=1)
    capped = t.add(conv_out + 1, keep="samples", count=2)
    stats_only = t.add(conv_out - 1, keep="none")
    logits_out = rng.standard_normal((BATCH, 10)).astype(np.float32)
    logits = t.add(logits_out)
    t.add((logits_out * 0.1).astype(np.float32), of=logits)
    loss = t.add(np.array(2.3, np.float32), batch_dim=None)
    target = t.add(np.array(TARGETS, np.int64))
    pred = t.add(logits_out.argmax(1).astype(np.int64))
    p_target = t.add(np.full(BATCH, 0.25, np.float32))
    calls = [
        _call(0, -1, 0, "module", "", "Net", [image], [logits], 1.0, 5.0, 8.0),
        _call(1, 0, 1, "module", "features.0", "Conv2d", [image], [conv], 1.1, 2.0, 3.0),
        _call(2, 0, 1, "module", "features.1", "ReLU", [conv], [relu], 3.2, 0.5, 0.4),
        _call(3, 0, 1, "function", "model.helper", None, [relu], [seq], 3.8, 0.3, None),
        _call(
            4, 3, 2, "function", "model.inner", None, [relu], [capped, stats_only], 3.9, 0.1, None
        ),
        _call(5, 0, 1, "module", "head", "Linear", [relu], [logits], 4.5, 1.0, 2.0),
        _call(6, -1, 0, "loss", "loss_fn", "CrossEntropyLoss", [logits], [loss], 6.5, 0.2, 0.1),
    ]
    record = {
        "batch": {
            "index": index,
            "step": 0,
            "micro": index,
            "loss": 2.3,
            "no_grad": False,
            "light": False,
            "batch_size": BATCH,
            "phase_ms": {
                "data": 1.0,
                "forward": 5.5,
                "loss": 0.2,
                "backward": 8.0,
                "optimizer": 0.5,
            },
            "overhead_ms": 0.7,
            "n_calls": len(calls),
        },
        "calls": calls,
        "tensors": t.entries,
        "data": {"batch": [{"name": "batch[0]", "tensor": image}]},
        "loss": {
            "call": 6,
            "fn": "cross_entropy",
            "reduction": "mean",
            "value": 2.3,
            "per_sample": PER_SAMPLE,
            "shape": [BATCH],
            "target": target,
            "pred": pred,
            "p_target": p_target,
        },
        "lines": [
            {
                "file": "model.py",
                "line": 12,
                "op": "conv2d",
                "shape": [BATCH, 8, 16, 16],
                "dtype": "float32",
                "count": 1,
                "ms": 0.5,
                "call": 1,
            },
            {
                "file": "model.py",
                "line": 14,
                "op": "relu",
                "shape": [BATCH, 8, 16, 16],
                "dtype": "float32",
                "count": 2,
                "ms": 0.1,
                "call": 2,
            },
        ],
    }
    ids = dict(
        image=image,
        conv=conv,
        relu=relu,
        seq=seq,
        capped=capped,
        stats_only=stats_only,
        logits=logits,
    )
    return record, t.arrays, {"ids": ids, "pixels": pixels}


def _step(rng: np.random.Generator) -> tuple[dict, dict[int, np.ndarray]]:
    t = _Tensors()
    params = []
    for name, shape in (("features.0.weight", (8, 3, 3, 3)), ("head.weight", (10, 2048))):
        w = rng.standard_normal(shape).astype(np.float32)
        g = (w * 0.1).astype(np.float32)
        u = (-g * 0.01).astype(np.float32)
        ids = {k: t.add(v, batch_dim=None) for k, v in (("weight", w), ("grad", g), ("update", u))}
        params.append(
            {
                "name": name,
                "module": name.rsplit(".", 1)[0],
                "shape": list(shape),
                "dtype": "float32",
                "optimizer": 0,
                "group": 0,
                **ids,
                "norms": {
                    "w": float(np.linalg.norm(w)),
                    "grad": float(np.linalg.norm(g)),
                    "update": float(np.linalg.norm(u)),
                    "ratio": float(np.linalg.norm(u) / np.linalg.norm(w)),
                },
            }
        )
    step = {
        "index": 0,
        "batches": [0, 1],
        "loss": 2.3,
        "optimizers": [{"cls": "SGD", "groups": [{"lr": 0.01}]}],
    }
    return {"step": step, "params": params, "tensors": t.entries}, t.arrays


def build_run(
    root: Path, name: str = "tvis_runs/20260101-120000_train_ab12cd", batches: int = 2
) -> SyntheticRun:
    """Write a complete synthetic run at ``root / name``."""
    rng = np.random.default_rng(0)
    writer = RunWriter(
        root / name,
        {"script": "train.py", "host": socket.gethostname(), "pid": -1, "argv": ["train.py"]},
    )
    writer.write_sources({"model.py": SOURCE, "train.py": SOURCE})
    maps, extra = [], {}
    for b in range(batches):
        record, arrays, info = _batch(b, rng)
        writer.write_batch(b, record, arrays)
        maps.append(record["batch"])
        extra = extra or info
    step_record, step_arrays = _step(rng)
    writer.write_step(0, step_record, step_arrays)
    writer.write_index(
        {
            "batches": maps,
            "steps": [step_record["step"]],
            "params": [
                {k: p[k] for k in ("name", "module", "shape", "dtype")}
                for p in step_record["params"]
            ],
            "notices": [
                {"level": "info", "text": "DataLoader workers moved to the main process (2 → 0)."}
            ],
            "data": {"classes": CLASSES, "normalize": {"mean": MEAN, "std": STD}},
            "project": str(root / "proj"),
            "model": {"params": 20696, "modules": 4},
        }
    )
    writer.write_meta(status=COMPLETE, ended=time.time())
    ids = extra["ids"]
    return SyntheticRun(
        root=root, name=name, conv_call=1, model_call=0, pixels=extra["pixels"], **ids
    )
