"""An in-memory agent client answering the protocol methods the tree and the inspector use,
over a synthetic model (a conv, ``n_blocks`` repeated blocks, a head, a loss).

Only for what a recorded example cannot give: a node with thousands of children, and a run
that grows while it is viewed. Every other test runs a real local agent process over a run
recorded from the image-classifier example.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tvis.agent.protocol import AgentError


class FakeClient:
    """A protocol-shaped client over a synthetic run of ``n_batches`` batches."""

    def __init__(self, n_blocks: int = 12, n_batches: int = 2, status: str = "complete") -> None:
        self.n_blocks = n_blocks
        self.status = status
        self.model = self._build_calls()
        self.n_batches = n_batches

    def describe(self) -> str:
        return "fake ./tvis_runs"

    def close(self) -> None:
        pass

    def silence(self) -> float:
        return 0.0  # in memory: never waits on a link

    def call(self, method: str, **params: Any) -> Any:
        answer = getattr(self, f"_{method}", None)
        if answer is None:  # as the real agent answers a method it does not know
            raise AgentError(f"unknown method {method!r}.", 400)
        return answer(**params)

    def call_background(self, method: str, **params: Any) -> Any:
        return self.call(method, **params)

    # -- the synthetic model -------------------------------------------------------------

    def _build_calls(self) -> list[dict[str, Any]]:
        calls: list[dict[str, Any]] = []

        def add(parent, name, cls, kind, phase, shape, line, t, fwd, bwd, flags=()):
            cid = len(calls)
            depth = 0 if parent < 0 else calls[parent]["depth"] + 1
            calls.append(
                {
                    "id": cid,
                    "parent": parent,
                    "depth": depth,
                    "kind": kind,
                    "name": name,
                    "cls": cls,
                    "phase": phase,
                    "def": ["model.py", line],
                    "site": ["train.py", 30],
                    "t0": t,
                    "fwd_ms": fwd,
                    "bwd_ms": bwd,
                    "no_grad": False,
                    "flags": list(flags),
                    "out_shape": shape,
                    "inputs": [{"name": "x", "tensor": 2 * cid}],
                    "outputs": [{"name": "out", "tensor": 2 * cid + 1}],
                }
            )
            return cid

        add(-1, "DataLoader", None, "data", "data", [8, 3, 16, 16], 1, 0.0, 1.0, None)
        net = add(-1, "", "Net", "module", "forward", [8, 10], 20, 1.0, 3.0, 5.0)
        add(net, "conv", "Conv2d", "module", "forward", [8, 8, 16, 16], 22, 1.1, 0.5, 0.9)
        blocks = add(net, "blocks", "Sequential", "module", "forward", [8, 32], 23, 1.6, 2.0, 3.0)
        for i in range(self.n_blocks):
            b = add(blocks, f"blocks.{i}", "Block", "module", "forward", [8, 32], 10, 1.7, 0.1, 0.2)
            flags = ("dead",) if i == 3 else ()
            add(
                b,
                f"blocks.{i}.fc",
                "Linear",
                "module",
                "forward",
                [8, 32],
                12,
                1.7,
                0.05,
                0.1,
                flags,
            )
        add(net, "head", "Linear", "module", "forward", [8, 10], 24, 3.9, 0.1, 0.2, ("nan",))
        add(-1, "cross_entropy", None, "loss", "loss", [], 40, 4.1, 0.2, 0.1)
        return calls

    def _row(self, call: dict[str, Any], batch: int) -> dict[str, Any]:
        row = {k: v for k, v in call.items() if k not in ("inputs", "outputs")}
        row["n_children"] = sum(1 for c in self.model if c["parent"] == call["id"])
        row["out_stats"] = self._stats(call["id"] * 2 + 1)
        row["grad_norm"] = 0.5 / (1 + call["id"])
        row["batch"] = batch
        return row

    def _path(self, cid: int) -> list[int]:
        path = []
        parent = self.model[cid]["parent"]
        while parent >= 0:
            path.insert(0, parent)
            parent = self.model[parent]["parent"]
        return path

    def _stats(self, tensor: int) -> dict[str, float]:
        return {
            "numel": 256,
            "mean": 0.1,
            "std": 1.0 + tensor / 100,
            "min": -2.0,
            "max": 3.0,
            "absmean": 0.8,
            "norm": 12.0,
            "zeros": 0.05,
            "nan": 0,
            "inf": 0,
        }

    def _entry(self, tensor: int) -> dict[str, Any]:
        shape = self.model[tensor // 2]["out_shape"] or [1]
        entry = {
            "id": tensor,
            "shape": shape,
            "dtype": "float32",
            "device": "cpu",
            "stats": self._stats(tensor),
            "hist": {"lo": -2.0, "hi": 3.0, "counts": [int(v) for v in np.hanning(32) * 50]},
            "batch_dim": 0,
            "batch_dim_inferred": False,
            "grad": 10_000 + tensor,
            "of": None,
        }
        entry["grad_entry"] = {**entry, "id": 10_000 + tensor, "grad": None, "of": tensor}
        return entry

    # -- protocol methods ----------------------------------------------------------------

    def _hello(self, protocol: int = 1) -> dict[str, Any]:
        return {"protocol": 1, "version": "0.1.0", "root": "/runs", "host": "fake"}

    def _runs(self) -> list[dict[str, Any]]:
        return [
            {
                "run": "20261129-101500_train_ab12cd",
                "run_id": "20261129-101500_train_ab12cd",
                "script": "train.py",
                "status": self.status,
                "started": 1_764_400_000.0,
                "ended": None,
                "steps": self.n_batches,
                "batches": self.n_batches,
                "calls": len(self.model) * self.n_batches,
                "bytes": 123456,
                "host": "fake",
            },
        ]

    def _run(self, run: str) -> dict[str, Any]:
        batches = [
            {
                "index": i,
                "step": i,
                "micro": 0,
                "loss": 2.3 - 0.1 * i,
                "batch_size": 8,
                "phase_ms": {
                    "data": 1.0,
                    "forward": 3.0,
                    "loss": 0.2,
                    "backward": 5.0,
                    "optimizer": 0.5,
                },
                "n_calls": len(self.model),
            }
            for i in range(self.n_batches)
        ]
        steps = [{"index": i, "batches": [i], "loss": 2.3 - 0.1 * i} for i in range(self.n_batches)]
        return {
            "meta": {"script": "train.py", "run_id": run},
            "status": self.status,
            "batches": batches,
            "steps": steps,
            "params": [
                {"name": "conv.weight", "module": "conv", "shape": [8, 3, 3, 3], "dtype": "float32"}
            ],
            "notices": [
                {"level": "info", "text": "DataLoader workers moved into the main process"}
            ],
            "data": {"classes": [f"class{i}" for i in range(10)]},
        }

    def _calls(self, run, batch, parent=-1, offset=0, limit=200):
        kids = [c for c in self.model if c["parent"] == parent]
        return {
            "total": len(kids),
            "calls": [self._row(c, batch) for c in kids[offset : offset + limit]],
        }

    def _call(self, run, batch, call):
        full = dict(self.model[call])
        full["inputs"] = [{**a, "entry": self._entry(a["tensor"])} for a in full["inputs"]]
        full["inputs"].append({"name": "dim", "repr": "1"})
        full["outputs"] = [{**a, "entry": self._entry(a["tensor"])} for a in full["outputs"]]
        full["path"] = self._path(call)
        return full

    def _view(
        self,
        run,
        tensor,
        batch=None,
        step=None,
        grad=False,
        sample=None,
        index=(),
        width=64,
        height=32,
    ):
        h, w = min(16, height), min(16, width)
        y, x = np.mgrid[0:h, 0:w].astype(np.float32)
        array = np.sin(x / 3 + tensor) * np.cos(y / 4) * (0.01 if grad else 1.0)
        return {
            "array": array.astype(np.float32),
            "lo": float(array.min()),
            "hi": float(array.max()),
            "shape": [16, 16],
            "window": [[0, 16], [0, 16]],
            "index": list(index) or [0],
            "sample": sample,
            "kept": "all",
            "downsampled": False,
        }
