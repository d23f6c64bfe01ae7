"""Values not stored because they follow exactly from a stored neighbour.

A ReLU's output is ``max(input, 0)``, and its input's gradient is its output's gradient
where the output is positive, zero elsewhere; an identity-like call (Dropout in eval, a
module returning its input) outputs its input. Storing both sides of such a call stores
the same information twice. ``find`` tries each call's tensor inputs against its tensor
outputs (and their gradients) and keeps a recipe only where the recipe, applied to the
values as they would be stored, gives back every bit of the value it replaces: nothing is
assumed of the module, so a recipe is exact for every case it is used in.

Two more places hold the same values twice. A ReLU whose input was made by an op no call
records (a residual block's ``relu(out + identity)``) has no entry for its input's
gradient, but that gradient reached the add's operands unchanged: the gradients of
``out`` and of ``identity`` (stored under the modules that made them) follow from the
ReLU's output gradient as ``relu_grad`` does. And any entry may be a copy of an earlier
one, of the same dtype and number of elements: a dataset item and the collated batch's
first sample, a module's output pooled once per call that returned it (a block and its
last ReLU), a pooling output and its flattened view. ``find`` tries these too, checked
bit for bit like the others. A value map
then says ``"derive": {"op": ..., ...}`` (format.py) and the reader rebuilds it on read,
elementwise, from only the elements an index asks for (``DerivedArray``).

Recipes (elementwise on the values in C order; all arrays the same dtype and number of
elements, the shapes may differ):

- ``{"op": "same", "of": a}``: the values of entry ``a``;
- ``{"op": "relu", "of": a}``: ``+0`` where ``a < 0``, ``a`` elsewhere (-0.0 and NaN stay),
  as ``torch.relu`` computes it;
- ``{"op": "relu_grad", "grad": g, "by": y}``: ``g`` where ``y > 0``, ``+0`` elsewhere, as
  ReLU's backward computes its input's gradient from its output ``y``.

A recipe names only entries with smaller ids, so chains end.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from functools import partial

import numpy as np

from tvis.store.chunks import LazyArray

# Elements compared before a whole comparison: most pairs differ within the first few.
_PROBE = 2048
# Earlier arrays a value is compared with whole when their sampled elements all agree.
_ALIKE = 8


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
    _through_untracked(entries, arrays, found, fits)
    _copies(arrays, found)
    return found


def _through_untracked(
    entries: dict[int, dict],
    arrays: dict[int, np.ndarray],
    found: dict[int, dict],
    fits: Callable[[int, int], bool],
) -> None:
    """Gradients that equal a ReLU's input gradient where that input has no entry of its
    own (it was made by an op no call records): the add of a residual block passes it on
    unchanged to both operands."""
    grads = [e["id"] for e in entries.values() if isinstance(e.get("of"), int)]
    for o, recipe in list(found.items()):
        go = entries.get(o, {}).get("grad")
        if recipe["op"] != "relu" or not isinstance(go, int) or go not in arrays:
            continue
        if isinstance(entries.get(recipe["of"], {}).get("grad"), int):
            continue  # the input's own gradient entry: already tried
        make = partial(_applied_to, _relu_grad, (arrays[go].reshape(-1), arrays[o].reshape(-1)))
        for g in grads:
            if g > max(go, o) and fits(go, g) and arrays[g].shape == arrays[o].shape:
                if _equal(arrays[g], make):
                    found[g] = {"op": "relu_grad", "grad": go, "by": o}


def _copies(arrays: dict[int, np.ndarray], found: dict[int, dict]) -> None:
    """Entries whose values are those of an earlier entry (same dtype and element count,
    any shape): ``same`` recipes. Arrays are grouped by a digest of their first and last
    elements and of elements spread over the whole, so only arrays that agree there are
    compared whole, and with at most ``_ALIKE`` earlier ones (arrays that agree on every
    sampled element and still differ are rare: zeros at both ends of padded sequences)."""
    seen: dict[tuple, list[int]] = {}
    for i in sorted(arrays):
        a = arrays[i]
        if a.size == 0 or a.dtype.kind not in "biuf":
            continue
        flat = a.reshape(-1)
        digest = hashlib.blake2b(digest_size=16)
        spread = flat[:: max(flat.size // _PROBE, 1)]
        for part in (flat[:_PROBE], flat[-_PROBE:], spread):
            digest.update(np.ascontiguousarray(part).data.cast("B"))
        key = (a.dtype.str, a.size, digest.digest())
        alike = seen.setdefault(key, [])
        if i in found:  # a recipe already: still the source of later copies
            alike.append(i)
            continue
        for j in alike[:_ALIKE]:
            if _equal(a, partial(_applied, OPS["same"][1], arrays[j].reshape(-1))):
                found[i] = {"op": "same", "of": j}
                break
        else:
            alike.append(i)


def _forward(x: np.ndarray, y: np.ndarray, i: int) -> dict | None:
    """How ``y`` follows from ``x`` (entry ``i``), if it does, bit for bit."""
    flat = x.reshape(-1)
    for op in ("same", "relu"):
        if _equal(y, partial(_applied, OPS[op][1], flat)):
            return {"op": op, "of": i}
    return None


def _applied(fn: Callable[..., np.ndarray], flat: np.ndarray, s: slice) -> np.ndarray:
    return fn(flat[s])


def _applied_to(
    fn: Callable[..., np.ndarray], flats: tuple[np.ndarray, ...], s: slice
) -> np.ndarray:
    return fn(*(flat[s] for flat in flats))


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

    def __init__(
        self, op: str, inputs: list[LazyArray | np.ndarray], shape: tuple[int, ...] | None = None
    ) -> None:
        first = inputs[0]
        super().__init__(first.dtype, tuple(first.shape) if shape is None else shape)
        self._fn = OPS[op][1]
        self._inputs = inputs

    def _elements(self, start: int, stop: int) -> np.ndarray:
        parts = [
            x._elements(start, stop) if isinstance(x, LazyArray) else x.reshape(-1)[start:stop]
            for x in self._inputs
        ]
        return np.ascontiguousarray(self._fn(*parts))
