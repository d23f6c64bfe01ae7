"""The Python API: recorded tensors from any target as numpy arrays (torch tensors where
torch is installed), over the same agent client the viewer uses.

    import tvis
    with tvis.connect("gpu:~/proj/tvis_runs") as runs:   # a folder, HOST:PATH, a saved target
        run = runs.open()                                 # the newest run
        out = run.activation("features.4", batch=0)       # metadata only, no values yet
        out.stats["std"], out.shape
        x = out.numpy()                                   # the values, at the link's speed
        dx = out.grad.numpy()                             # dL/d(output)
        dw = run.param("features.0.weight", step=1, which="update").numpy()

Everything is fetched lazily: a handle holds a tensor's record (shape, dtype, statistics,
how its values were kept); ``numpy()`` moves the values, every time it is called. Every
failure is an ``AgentError`` with one sentence. Nothing here needs torch: ``torch()``
imports it only when called (the one torch edge of this module, like tvis.live's).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from tvis.agent.client import Client, Progress, empty_for
from tvis.agent.client import connect as connect_client
from tvis.agent.protocol import BAD_REQUEST, NOT_FOUND, AgentError

__all__ = ["AgentError", "Call", "Connection", "Run", "Tensor", "connect"]

# Calls offered when a name matches none exactly: enough to spot a typo, short enough to read.
SUGGESTIONS = 5
# Calls scanned for an exact name: the agent's page limit, far beyond any one name's uses.
FIND_LIMIT = 5000
PARAM_VIEWS = ("weight", "grad", "update")


def connect(
    target: str | os.PathLike[str],
    *,
    via: Sequence[str] = (),
    remote_tvis: str | None = None,
    ssh_command: Sequence[str] | None = None,
    control_dir: Path | None = None,
) -> Connection:
    """A connection to the runs at ``target``: a folder here, ``HOST:PATH`` (any ssh host
    or ``~/.ssh/config`` alias) or a saved target name, as ``tvis tui`` takes it.

    ``via`` names jump hosts in order; ``remote_tvis`` the tvis command on the host when it
    is not on its PATH; ``ssh_command`` replaces ``ssh`` (as ``$TVIS_SSH_COMMAND`` does) and
    ``control_dir`` is where shared ssh connections keep their sockets. Raises
    ``AgentError`` when the target cannot be reached."""
    from tvis.targets import TargetError, resolve

    try:
        resolved = resolve(os.fspath(target), via=via, remote_tvis=remote_tvis)
    except TargetError as e:
        raise AgentError(str(e), BAD_REQUEST) from None
    return Connection(connect_client(resolved, ssh_command=ssh_command, control_dir=control_dir))


class Connection:
    """An open agent session and the runs it serves; close it (or use ``with``) when done."""

    def __init__(self, client: Client) -> None:
        self.client = client

    def __repr__(self) -> str:
        return f"<tvis connection to {self.client.describe()}>"

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.client.close()

    def runs(self) -> list[dict[str, Any]]:
        """Every run under the target, newest first (``run``, ``run_id``, ``script``,
        ``status``, ``steps``, ``batches``, ``bytes`` ...)."""
        return self.client.call("runs")

    def open(self, run: str | None = None) -> Run:
        """The run named ``run`` (its id, its path under the target, or a unique part of
        its id), or the newest run."""
        runs = [r for r in self.runs() if r.get("status") != "unreadable"]
        if not runs:
            raise AgentError(f"no readable runs under {self.client.describe()}.", NOT_FOUND)
        if run is None:
            return Run(self.client, runs[0]["run"])
        exact = [r for r in runs if run in (r.get("run"), r.get("run_id"))]
        partial = [r for r in runs if run in str(r.get("run_id"))]
        found = exact or partial
        if len(found) == 1:
            return Run(self.client, found[0]["run"])
        if not found:
            names = ", ".join(str(r.get("run_id")) for r in runs[:SUGGESTIONS])
            raise AgentError(f"there is no run {run!r}; the newest are {names}.", NOT_FOUND)
        names = ", ".join(str(r.get("run_id")) for r in found[:SUGGESTIONS])
        raise AgentError(f"{run!r} matches several runs ({names}); say which.", BAD_REQUEST)


class Run:
    """One recorded run: its batches, steps and parameters, and handles on its tensors."""

    def __init__(self, client: Client, name: str) -> None:
        self.client = client
        self.name = name
        self.info: dict[str, Any] = client.call("run", run=name)

    def __repr__(self) -> str:
        return (
            f"<tvis run {self.id} ({self.status}): {len(self.batches)} batches, "
            f"{len(self.steps)} steps>"
        )

    @property
    def id(self) -> str:
        return str(self.info.get("run_id") or self.name)

    @property
    def status(self) -> str:
        return str(self.info.get("status") or "")

    @property
    def batches(self) -> list[int]:
        """The recorded batch indices (light batches can leave gaps)."""
        return [b["index"] for b in self.info.get("batches") or []]

    @property
    def steps(self) -> list[int]:
        return [s["index"] for s in self.info.get("steps") or []]

    @property
    def params(self) -> list[str]:
        """The names of the model's parameters."""
        return [p["name"] for p in self.info.get("params") or []]

    def find(self, query: str, batch: int = 0) -> list[dict[str, Any]]:
        """Calls of ``batch`` whose name or class contains ``query`` (any case)."""
        return self.client.call("find", run=self.name, batch=batch, query=query, limit=FIND_LIMIT)

    def call(self, call: str | int, batch: int = 0, nth: int = 0) -> Call:
        """A call of ``batch`` by id, or by name (a module path such as ``features.4``, a
        function name, or a class for unnamed calls); ``nth`` picks among calls sharing a
        name, in call order."""
        if isinstance(call, str):
            call = self._call_id(call, batch, nth)
        return Call(self, batch, self.client.call("call", run=self.name, batch=batch, call=call))

    def _call_id(self, name: str, batch: int, nth: int) -> int:
        rows = self.find(name, batch)
        named = [r for r in rows if (r.get("name") or r.get("cls")) == name]
        if nth < len(named):
            return named[nth]["id"]
        if named:
            raise AgentError(
                f"batch {batch} has {len(named)} calls named {name!r}; nth must be below that.",
                BAD_REQUEST,
            )
        close = ", ".join(str(r.get("name") or r.get("cls")) for r in rows[:SUGGESTIONS])
        hint = f"; calls containing it: {close}" if close else "; see run.find(...)"
        raise AgentError(f"batch {batch} has no call named {name!r}{hint}.", NOT_FOUND)

    def activation(self, call: str | int, batch: int = 0, output: int | str = 0) -> Tensor:
        """Output ``output`` (position or argument name) of a call: see ``call``."""
        return self.call(call, batch).output(output)

    def gradient(self, call: str | int, batch: int = 0, output: int | str = 0) -> Tensor:
        """dL/d(output) of a call's output."""
        return self.activation(call, batch, output).grad

    def param(self, name: str, step: int = 0, which: str = "weight") -> Tensor:
        """A parameter at optimizer step ``step``: ``weight`` (its value before the step),
        ``grad``, or ``update`` (Δw = p_after − p_before exactly)."""
        if which not in PARAM_VIEWS:
            raise AgentError("which must be 'weight', 'grad' or 'update'.", BAD_REQUEST)
        params = self.client.call("step", run=self.name, step=step).get("params") or []
        record = next((p for p in params if p.get("name") == name), None)
        if record is None:
            raise AgentError(
                f"step {step} has no parameter {name!r}; run.params lists them.", NOT_FOUND
            )
        tensor = record.get(which)
        if not isinstance(tensor, int):
            raise AgentError(
                f"parameter {name!r} has no recorded {which} at step {step}.", NOT_FOUND
            )
        return self.tensor(tensor, step=step, label=f"{name} {which} at step {step}")

    def tensor(
        self, tensor: int, *, batch: int | None = None, step: int | None = None, label: str = ""
    ) -> Tensor:
        """A tensor by its id within a batch or a step (exactly one of the two)."""
        entry = self.client.call("tensor", run=self.name, tensor=tensor, batch=batch, step=step)
        where = f"batch {batch}" if batch is not None else f"step {step}"
        return Tensor(
            self, entry, batch=batch, step=step, label=label or f"tensor {tensor} of {where}"
        )


class Call:
    """A module or function call of one batch, with its tensor arguments as handles."""

    def __init__(self, run: Run, batch: int, record: dict[str, Any]) -> None:
        self.run = run
        self.batch = batch
        self.record = record
        self.id: int = record["id"]
        self.name: str = record.get("name") or record.get("cls") or f"call {self.id}"
        self.inputs = self._tensors("inputs")
        self.outputs = self._tensors("outputs")

    def __repr__(self) -> str:
        cls = f" ({self.record['cls']})" if self.record.get("cls") else ""
        return f"<tvis call {self.id} {self.name}{cls} in batch {self.batch}>"

    def _tensors(self, side: str) -> list[Tensor]:
        found = []
        for i, arg in enumerate(self.record.get(side) or []):
            if isinstance(arg, dict) and isinstance(arg.get("entry"), dict):
                label = f"{side[:-1]} {arg.get('name') or i} of {self.name} in batch {self.batch}"
                found.append(
                    Tensor(
                        self.run, arg["entry"], batch=self.batch, label=label, arg=arg.get("name")
                    )
                )
        return found

    def output(self, which: int | str = 0) -> Tensor:
        """An output tensor by position among the tensor outputs, or by argument name."""
        return self._pick(self.outputs, which, "output")

    def input(self, which: int | str = 0) -> Tensor:
        return self._pick(self.inputs, which, "input")

    def _pick(self, tensors: list[Tensor], which: int | str, side: str) -> Tensor:
        if isinstance(which, str):
            found = next((t for t in tensors if t.arg == which), None)
        else:
            found = tensors[which] if -len(tensors) <= which < len(tensors) else None
        if found is None:
            names = ", ".join(str(t.arg) for t in tensors) or "none"
            raise AgentError(
                f"{self.name} has no tensor {side} {which!r} (its tensor {side}s: {names}).",
                NOT_FOUND,
            )
        return found


class Tensor:
    """A recorded tensor: its record now, its values when ``numpy()`` or ``torch()`` asks."""

    def __init__(
        self,
        run: Run,
        entry: dict[str, Any],
        *,
        batch: int | None = None,
        step: int | None = None,
        label: str = "",
        arg: str | None = None,
    ) -> None:
        if not (isinstance(entry, dict) and isinstance(entry.get("id"), int)):
            raise AgentError(f"the agent sent {label or 'a tensor'} without a tensor id.")
        self.run = run
        self.entry = entry
        self.batch = batch
        self.step = step
        self.id: int = entry["id"]
        self.label = label or f"tensor {self.id}"
        self.arg = arg

    def __repr__(self) -> str:
        shape = "×".join(map(str, self.shape)) or "scalar"
        kept = {"all": "", None: ", values not kept"}.get(self.kept, f", values kept: {self.kept}")
        if self.bits is not None:
            kept += f", values to {self.bits + 1} significant bits"
        return f"<tvis tensor {self.label}: {shape} {self.dtype}{kept}>"

    @property
    def shape(self) -> tuple[int, ...]:
        """The shape the tensor had in training (the stored values may be fewer: ``kept``)."""
        return tuple(self.entry.get("shape") or ())

    @property
    def dtype(self) -> str:
        return str(self.entry.get("dtype", "?"))

    @property
    def stats(self) -> dict[str, Any]:
        """Statistics over the whole tensor: mean, std, min, max, absmean, norm, zeros,
        nan, inf, numel."""
        return dict(self.entry.get("stats") or {})

    @property
    def kept(self) -> str | None:
        """How the values were kept: ``all``, ``samples`` or ``rows`` (the first
        ``entry["value"]["count"]`` along the batch dim or dim 0), or None (stats only)."""
        value = self.entry.get("value")
        return value.get("kept", "all") if value else None

    @property
    def bits(self) -> int | None:
        """Mantissa bits the stored values keep: 10 (11 significant bits, a relative error of
        at most 2^-11) for activations and gradients of a run recorded without --exact;
        None when every bit was kept (weights, Δw, the data, the loss, --exact runs).
        Statistics are of the exact values either way."""
        bits = (self.entry.get("value") or {}).get("bits")
        return bits if isinstance(bits, int) and not isinstance(bits, bool) else None

    @property
    def stored_shape(self) -> tuple[int, ...] | None:
        """The shape of the stored values (what ``numpy()`` returns), None if not kept."""
        value = self.entry.get("value")
        return tuple(value["shape"]) if value else None

    @property
    def grad(self) -> Tensor:
        """dL/d(this tensor), as recorded."""
        grad = self.entry.get("grad_entry")
        if not isinstance(grad, dict):
            raise AgentError(f"{self.label} has no recorded gradient.", NOT_FOUND)
        return Tensor(
            self.run, grad, batch=self.batch, step=self.step, label=f"gradient of {self.label}"
        )

    def numpy(self, progress: Progress | None = None) -> np.ndarray:
        """The stored values as a new array (fetched now; ``progress(done, total)`` is
        called as bytes arrive)."""
        value = self.entry.get("value")
        if not isinstance(value, dict) or not value:
            raise AgentError(
                f"{self.label} has statistics only; its values were not kept "
                "(record with a larger --max-elems to keep them).",
                NOT_FOUND,
            )
        out = empty_for(value, self.label)
        if out.nbytes:
            where = {"batch": self.batch} if self.batch is not None else {"step": self.step}
            self.run.client.read_values(
                memoryview(out.reshape(-1).view(np.uint8)),
                progress,
                run=self.run.name,
                tensor=self.id,
                **where,
            )
        return out

    def torch(self, progress: Progress | None = None) -> Any:
        """The stored values as a torch tensor (needs torch on this machine)."""
        try:
            import torch
        except ImportError:
            raise AgentError(
                "torch is not installed on this machine; use .numpy() instead.", BAD_REQUEST
            ) from None
        return torch.from_numpy(self.numpy(progress))

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        values = self.numpy()
        return values if dtype is None else values.astype(dtype, copy=False)
