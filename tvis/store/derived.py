"""Values not stored because they follow exactly from a stored neighbour.

A ReLU's output is ``max(input, 0)``, and its input's gradient is its output's gradient
where the output is positive, zero elsewhere; an identity-like call (Dropout in eval, a
module returning its input) outputs its input. Storing both sides of such a call stores
the same information twice. ``find`` tries each call's tensor inputs against its tensor
outputs (and their gradients) and keeps a recipe only where the recipe, applied to the
values as they would be stored, gives back every bit of the value it replaces: nothing is
assumed of the module, so a recipe is exact for every case it is used in. A value map
then says ``"derive": {"op": ..., ...}`` (format.py) and the reader rebuilds it on read,
elementwise, from only the elements an index asks for (``DerivedArray``).

Recipes (elementwise, all arrays the same dtype and shape):

- ``{"op": "same", "of": a}``: the values of entry ``a``;
- ``{"op": "relu", "of": a}``: ``+0`` where ``a < 0``, ``a`` elsewhere (-0.0 and NaN stay),
  as ``torch.relu`` computes it;
- ``{"op": "relu_grad", "grad": g, "by": y}``: ``g`` where ``y > 0``, ``+0`` elsewhere, as
  ReLU's backward computes its input's gradient from its output ``y``.

A recipe names only entries with smaller ids, so chains end.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import partial

import numpy as np

from tvis.store.chunks import LazyArray

# Elements compared before a whole comparison: most pairs differ within the first few.
_PROBE = 2048


def _relu(x: np.ndarray) -> np.ndarray:
    return np.where(x < 0, np.zeros((), x.dtype), x)


def _relu_grad(g: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.where(y <= 0, np.zeros((), g.dtype), g)


# op -> (the keys naming its sources, in order; the function of their values)
OPS: dict[str, tuple[tuple[str, ...], Callable[..., np.ndarray]]] = {
    "same": (("of",), lambda a: a),
    "relu": (("of",), _relu),
    "relu_grad": (("grad", "by"), _relu_grad),
}


def sources(recipe: dict) -> list[int]:
    """The entry ids a recipe reads (ValueError for one this tvis does not know)."""
    op = OPS.get(str(recipe.get("op"))) if isinstance(recipe, dict) else None
    if op is None:
        raise ValueError(f"unknown derivation {recipe!r}")
    named = [recipe.get(key) for key in op[0]]
    ids = [i for i in named if isinstance(i, int) and not isinstance(i, bool)]
    if len(ids) != len(named):
        raise ValueError(f"a derivation names no entry: {recipe!r}")
    return ids


def find(record: dict, arrays: dict[int, np.ndarray]) -> dict[int, dict]:
    """Recipes for entries of a batch record whose ``arrays`` (as they will be stored)
    follow exactly from others': {entry id: recipe}."""
    entries = {e["id"]: e for e in record.get("tensors") or [] if isinstance(e, dict)}
    found: dict[int, dict] = {}

    def fits(i: int, o: int) -> bool:
        a, b = arrays.get(i), arrays.get(o)
        return (
            a is not None
            and b is not None
            and i < o
            and o not in found
            and a.dtype == b.dtype
            and a.shape == b.shape
            and a.dtype.kind == "f"
            and a.size > 0
        )

    for call in record.get("calls") or []:
        for i in _ids(call.get("inputs")):
            for o in _ids(call.get("outputs")):
                if not fits(i, o):
                    continue
                recipe = _forward(arrays[i], arrays[o], i)
                if recipe is None:
                    continue
                found[o] = recipe
                gi, go = entries.get(i, {}).get("grad"), entries.get(o, {}).get("grad")
                if isinstance(gi, int) and isinstance(go, int) and fits(go, gi):
                    grad = _backward(recipe, arrays[gi], arrays[go], go, o, arrays[o])
                    if grad is not None:
                        found[gi] = grad
    return found


def _forward(x: np.ndarray, y: np.ndarray, i: int) -> dict | None:
    """How ``y`` follows from ``x`` (entry ``i``), if it does, bit for bit."""
    flat = x.reshape(-1)
    for op in ("same", "relu"):
        if _equal(y, partial(_applied, OPS[op][1], flat)):
            return {"op": op, "of": i}
    return None


def _applied(fn: Callable[..., np.ndarray], flat: np.ndarray, s: slice) -> np.ndarray:
    return fn(flat[s])


def _backward(
    forward: dict, gx: np.ndarray, gy: np.ndarray, go: int, o: int, y: np.ndarray
) -> dict | None:
    """How the input's gradient ``gx`` follows from the output's ``gy`` (entry ``go``)."""
    if forward["op"] == "same" and _equal(gx, lambda s: gy.reshape(-1)[s]):
        return {"op": "same", "of": go}
    if _equal(gx, lambda s: _relu_grad(gy.reshape(-1)[s], y.reshape(-1)[s])):
        return {"op": "relu_grad", "grad": go, "by": o}
    return None


def _equal(target: np.ndarray, make: Callable[[slice], np.ndarray]) -> bool:
    """Whether ``make(s)`` has the bits of ``target``'s flat elements ``s``: a probe of the
    first elements, then the whole (NaN payloads and the sign of zero count)."""
    flat = target.reshape(-1)
    for s in (slice(0, _PROBE), slice(None)):
        made = np.ascontiguousarray(make(s))
        if not np.array_equal(_bits(flat[s]), _bits(made)):
            return False
        if flat.size <= _PROBE:
            break
    return True


def _bits(a: np.ndarray) -> np.ndarray:
    return a.view(f"<u{a.dtype.itemsize}")


def _ids(args: Iterable | None) -> Iterable[int]:
    for arg in args or []:
        if isinstance(arg, dict) and isinstance(arg.get("tensor"), int):
            yield arg["tensor"]


class DerivedArray(LazyArray):
    """A value rebuilt from stored neighbours: the elements an index asks for, made from
    the same elements of its sources."""

    def __init__(self, op: str, inputs: list[LazyArray | np.ndarray]) -> None:
        first = inputs[0]
        super().__init__(first.dtype, tuple(first.shape))
        self._fn = OPS[op][1]
        self._inputs = inputs

    def _elements(self, start: int, stop: int) -> np.ndarray:
        parts = [
            x._elements(start, stop) if isinstance(x, LazyArray) else x.reshape(-1)[start:stop]
            for x in self._inputs
        ]
        return np.ascontiguousarray(self._fn(*parts))
