"""Tensor summaries: statistics, a histogram and the values worth keeping.

Statistics always describe the whole tensor. On a device they are a few reductions with
a single host sync; on the CPU, a few passes over cache-sized chunks (and ``fill`` computes
them later, on the writer thread, for copies the recorder queued). Only the values that
will be kept are copied to the host, early, so nothing captured waits on the device until
the batch ends.
"""

from __future__ import annotations

import hashlib
import math
import threading

import numpy as np
import torch

from tvis.store import host_memory

HIST_BINS = 32

# Beyond this many elements the histogram is taken over a spread-out subset (its shape,
# not its counts, is what a person reads); statistics still use every element. The subset
# is runs of HIST_RUN neighbours, so it touches a few hundred pages, not thousands.
HIST_SAMPLE = 1 << 13
HIST_RUN = 32

# CPU statistics go through numpy up to this size (a torch op costs a few microseconds
# to dispatch, more than the work on a small tensor) and in chunks of CHUNK elements
# above it, so every pass after the first over a chunk reads from cache.
SMALL = 1 << 12
CHUNK = 1 << 17

# E[x²] - E[x]² keeps about log10(1/eps) - log10(mean²/var) digits: recompute in two
# passes when mean² exceeds var by this factor.
VARIANCE_GUARD = 1e4

# dtypes numpy cannot hold (or that lose nothing when widened): stored as float32.
_WIDEN = {torch.bfloat16, torch.float16}
_FLOAT8 = {getattr(torch, n) for n in dir(torch) if n.startswith("float8_")}


def _as_real(x: torch.Tensor) -> torch.Tensor:
    """A real floating view of ``x`` for statistics (complex → magnitude)."""
    if x.is_complex():
        return x.abs()
    if x.dtype in (torch.float32, torch.float64):
        return x.resolve_neg()
    return x.to(torch.float32)


def digest(x: torch.Tensor) -> str | None:
    """The first 16 hex digits of BLAKE2b over ``x``'s raw bytes (None for a tensor
    ``not_captured``): equal digests mean bit-identical tensors, compared without values."""
    if not_captured(x):
        return None
    with torch._C.DisableTorchFunction():
        flat = x.detach().reshape(-1)
        if flat.device.type != "cpu":
            flat = flat.cpu()
        raw = flat.contiguous().view(torch.uint8).numpy() if flat.numel() else b""
    h = hashlib.blake2b(digest_size=8)
    h.update(repr((tuple(x.shape), str(x.dtype))).encode())
    h.update(raw)
    return h.hexdigest()


def digest_tree(value: object) -> str | None:
    """One digest over every tensor inside a (nested) batch, in order; None if none."""
    parts: list[str] = []

    def walk(v: object) -> None:
        if isinstance(v, torch.Tensor):
            parts.append(digest(v) or "")
        elif isinstance(v, dict):
            for item in v.values():
                walk(item)
        elif isinstance(v, (list, tuple)):
            for item in v:
                walk(item)

    walk(value)
    return hashlib.blake2b("".join(parts).encode(), digest_size=8).hexdigest() if parts else None


def stored(x: torch.Tensor) -> tuple[torch.Tensor, int]:
    """``x`` without its broadcast dims (stride 0, as ``expand`` makes), and how many times
    each of its elements stands in ``x``: every element of an expanded tensor repeats
    equally often, so its statistics come from its storage, weighted by that count."""
    if x.layout != torch.strided or x.is_nested or 0 not in x.stride():
        return x, 1
    repeat, index = 1, []
    for size, stride in zip(x.shape, x.stride(), strict=True):
        if stride == 0 and size > 1:
            repeat *= size
            index.append(slice(0, 1))
        else:
            index.append(slice(None))
    return x[tuple(index)], repeat


def stats(x: torch.Tensor) -> tuple[dict, dict | None]:
    """Statistics and a histogram of ``x`` (non-finite values excluded from moments), in
    time proportional to its storage (an expanded tensor's repeats are counted, not read)."""
    n = x.numel()
    if n == 0 or x.device.type == "meta":
        return {"numel": n}, None
    part, repeat = stored(x)
    summary, hist = _stats(part)
    if repeat > 1:
        summary.update(numel=n, nan=summary["nan"] * repeat, inf=summary["inf"] * repeat)
        summary["norm"] *= math.sqrt(repeat)
        if hist is not None:
            hist["counts"] = [c * repeat for c in hist["counts"]]
    return summary, hist


def _stats(x: torch.Tensor) -> tuple[dict, dict | None]:
    n = x.numel()
    xf = _as_real(x.detach())
    if xf.is_sparse:
        xf = xf.coalesce().values()
    flat = xf.reshape(-1)
    if n <= SMALL and flat.numel() == n and flat.device.type == "cpu":
        found = _small_stats(flat)
        if found is not None:
            return found
    mean_, std_, lo_, hi_, l1, l2, nonzero = _moments(flat)
    nan = inf = 0
    if not all(math.isfinite(v) for v in (mean_, std_, lo_, hi_)):
        nan = int(torch.isnan(flat).sum())
        inf = int(torch.isinf(flat).sum())
        flat = flat[torch.isfinite(flat)]
        if flat.numel():
            mean_, std_, lo_, hi_, l1, l2, nonzero = _moments(flat)
            nonzero += nan + inf
        else:
            mean_ = std_ = lo_ = hi_ = l1 = l2 = float("nan")
            nonzero = n
    m = max(n - nan - inf, 1)
    summary = _summary(n, mean_, std_, lo_, hi_, l1 / m, l2, nonzero, nan, inf)
    return summary, _histogram(flat, lo_, hi_)


def _summary(
    n: int,
    mean: float,
    std: float,
    lo: float,
    hi: float,
    absmean: float,
    norm: float,
    nonzero: int,
    nan: int = 0,
    inf: int = 0,
) -> dict:
    return {
        "numel": n,
        "mean": mean,
        "std": std,
        "min": lo,
        "max": hi,
        "absmean": absmean,
        "norm": norm,
        "zeros": (n - nonzero) / n,
        "nan": nan,
        "inf": inf,
    }


def _small_stats(flat: torch.Tensor) -> tuple[dict, dict] | None:
    """``stats`` of a small, finite CPU tensor in numpy alone: the same values as the
    general path, with a third of its calls (a small tensor's statistics are almost all
    call overhead). None when a value is not finite: the general path counts those."""
    a = flat.numpy()
    with np.errstate(all="ignore"):
        total, sq, lo, hi, l1, nonzero = _sums_numpy(a)
    n = a.size
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return None
    mean = total / n
    var = max(sq / n - mean * mean, 0.0)
    if mean * mean > VARIANCE_GUARD * var and math.isfinite(mean) and hi > lo:
        var = float(torch.linalg.vector_norm(flat - mean)) ** 2 / n
    std = math.sqrt(var)
    if not (math.isfinite(mean) and math.isfinite(std)):
        return None
    summary = _summary(n, mean, std, lo, hi, l1 / n, math.sqrt(sq), nonzero)
    values = a if a.dtype == np.float32 else a.astype(np.float32)
    return summary, _bin(values, lo, hi, 1)


def fill(pending: list) -> int:
    """Statistics of entries whose computation was put off, from (entry, tensor) pairs
    whose tensors nobody else writes; returns how many could not be computed."""
    failed = 0
    with torch._C.DisableTorchFunction():  # a private copy: no subclass, no mode
        for entry, t in pending:
            try:
                entry["stats"], entry["hist"] = stats(t)
            except Exception:
                failed += 1  # the entry keeps its numel: a record without statistics
    return failed


def _moments(flat: torch.Tensor) -> list[float]:
    """Mean, std, min, max, L1 and L2 norms and non-zero count of a flat float tensor.

    The variance comes from E[x²] - E[x]² (one pass each, unlike ``std_mean``'s Welford
    kernel, ~40x slower on CPU); when |mean| dwarfs the spread, where that formula loses
    its digits, a second, shifted pass takes over.
    """
    n = flat.numel()
    sums = _sums_cpu if flat.device.type == "cpu" else _sums_device
    total, sq, lo, hi, l1, nonzero = sums(flat)
    mean = total / n
    var = max(sq / n - mean * mean, 0.0)
    if mean * mean > VARIANCE_GUARD * var and math.isfinite(mean) and hi > lo:
        var = float(torch.linalg.vector_norm(flat - mean)) ** 2 / n
    return [mean, math.sqrt(var), lo, hi, l1, math.sqrt(sq), nonzero]


def _sums_cpu(flat: torch.Tensor) -> list[float]:
    """Σx, Σx², min, max, Σ|x| and the non-zero count on the host, chunk by chunk."""
    if flat.numel() <= SMALL:
        a = flat.numpy()
        with np.errstate(all="ignore"):  # inf - inf in a sum is the user's, not a warning
            return _sums_numpy(a)
    total = sq = l1 = nonzero = 0.0
    lo, hi = math.inf, -math.inf
    scratch = _scratch(flat.dtype)
    for start in range(0, flat.numel(), CHUNK):
        part = flat[start : start + CHUNK]
        a = part.numpy()
        # numpy's SIMD min and max take half the time of torch.aminmax on one thread.
        lo, hi = min(lo, float(a.min())), max(hi, float(a.max()))
        total += float(part.sum())
        sq += float(part.dot(part))
        # Σ|x| = x·sign(x) and the non-zero count = sign(x)·sign(x): two BLAS dots over
        # one reused buffer, not count_nonzero's slow integer path or fresh allocations.
        sign = torch.sign(part, out=scratch[: part.numel()])
        l1 += float(part.dot(sign))
        nonzero += float(sign.dot(sign))
    return [total, sq, lo, hi, l1, nonzero]


def _sums_numpy(a: np.ndarray) -> list[float]:
    return [
        float(a.sum()),
        float(np.dot(a, a)),
        float(a.min()),
        float(a.max()),
        float(np.abs(a).sum()),
        float(np.count_nonzero(a)),
    ]


# Per thread: statistics run on the training thread, the writer thread and autograd's.
_SCRATCH = threading.local()


def _scratch(dtype: torch.dtype) -> torch.Tensor:
    """A CHUNK-long buffer reused by every statistics pass of this thread on this dtype."""
    buffers = _SCRATCH.__dict__
    buffer = buffers.get(dtype)
    if buffer is None:
        buffer = buffers[dtype] = torch.empty(CHUNK, dtype=dtype)
    return buffer


def _sums_device(flat: torch.Tensor) -> list[float]:
    """The same sums on the tensor's own device, in one host sync."""
    lo, hi = torch.aminmax(flat)
    sign = flat.sign()
    return torch.stack(
        [flat.sum(), flat.dot(flat), lo, hi, flat.dot(sign), sign.dot(sign)]
    ).tolist()


def _histogram(flat: torch.Tensor, lo: float, hi: float) -> dict | None:
    if not flat.numel() or not (math.isfinite(lo) and math.isfinite(hi)):
        return None
    n = flat.numel()
    part, every = flat, 1
    if n > HIST_SAMPLE:
        runs = HIST_SAMPLE // HIST_RUN
        gap = n // runs
        part = flat[: runs * gap].reshape(runs, gap)[:, :HIST_RUN]
        every = round(gap / HIST_RUN)
    return _bin(part.to("cpu", torch.float32).reshape(-1).numpy(), lo, hi, every)


def _bin(values: np.ndarray, lo: float, hi: float, every: int) -> dict:
    """HIST_BINS counts of float32 ``values`` over [lo, hi] (finite; a constant tensor's
    range is [lo, lo + 1])."""
    if hi <= lo:
        hi = lo + 1.0
    scaled = np.subtract(values, np.float32(lo), dtype=np.float32)
    scaled *= np.float32(HIST_BINS / (hi - lo))
    bins = scaled.astype(np.intp)  # ≥ 0: lo is the minimum
    np.minimum(bins, HIST_BINS - 1, out=bins)  # hi lands in the last bin (np.clip is slow)
    counts = np.bincount(bins, minlength=HIST_BINS)
    hist = {"lo": lo, "hi": hi, "counts": counts.tolist()}
    if every > 1:
        hist["sampled"] = every  # counts are of about one element in ``every``
    return hist


def to_numpy(x: torch.Tensor, owned: bool = False) -> np.ndarray:
    """A host copy of ``x`` as numpy (bf16/fp16/fp8 widened to float32, complex as is);
    a tensor tvis ``owned`` (a copy nobody else holds) is shared on the host, not copied.
    A large copy lies outside the script's malloc heap (tvis/store/host_memory.py)."""
    x = x.detach()
    if x.is_sparse:
        x = x.to_dense()
    wide = x.dtype in _WIDEN or x.dtype in _FLOAT8
    dtype = _numpy_dtype(torch.float32 if wide else x.dtype)
    small = dtype is None or x.numel() * dtype.itemsize < host_memory.MMAP_BYTES
    if small or (owned and not wide):
        if wide:
            x = x.to(torch.float32)
        return x.to("cpu", copy=not owned).resolve_conj().resolve_neg().numpy()
    out = host_memory.empty(tuple(x.shape), dtype)
    torch.from_numpy(out).copy_(x.resolve_conj().resolve_neg())  # widens as it copies
    return out


def private_copy(x: torch.Tensor) -> torch.Tensor:
    """A copy of CPU tensor ``x`` for statistics the writer thread computes later. A large
    one lies outside the script's malloc heap (tvis/store/host_memory.py): the writer frees
    it whenever it gets to it, and a hole punched then among the next step's activations
    would move where the script's heap grows from run to run."""
    x = x.detach()
    dtype = _numpy_dtype(x.dtype)
    if dtype is None or x.numel() * dtype.itemsize < host_memory.MMAP_BYTES:
        return x.clone()
    out = torch.from_numpy(host_memory.empty(tuple(x.shape), dtype))
    out.copy_(x.resolve_conj().resolve_neg())
    return out


_NUMPY_DTYPES: dict[torch.dtype, np.dtype | None] = {}


def _numpy_dtype(dtype: torch.dtype) -> np.dtype | None:
    """numpy's dtype for torch's, or None where numpy has none."""
    if dtype not in _NUMPY_DTYPES:
        try:
            _NUMPY_DTYPES[dtype] = torch.empty(0, dtype=dtype).numpy().dtype
        except (TypeError, RuntimeError):
            _NUMPY_DTYPES[dtype] = None
    return _NUMPY_DTYPES[dtype]


def keep(
    x: torch.Tensor,
    batch_dim: int | None,
    samples: int,
    max_elems: int,
    span: int = 1,
    max_bytes: float = float("inf"),
    owned: bool = False,
):
    """The part of ``x`` worth storing and how it was cut (nothing past ``max_bytes``).

    With a batch dimension: the first ``samples`` samples (``span`` rows each for merged
    ``[B*T, ...]`` tensors). Without one: the leading rows that fit in ``max_elems``.
    """
    if x.device.type == "meta" or x.numel() == 0:
        return None, None
    if batch_dim is not None and x.dim() > 0:
        count = min(samples * span, x.shape[batch_dim])
        part = x.narrow(batch_dim, 0, count)
        if part.numel() > max_elems:
            part = _leading_rows(part, max_elems)
        kept = {"kept": "samples", "count": samples if count < x.shape[batch_dim] else None}
    elif x.numel() <= max_elems:
        part, kept = x, {"kept": "all"}
    else:
        part = _leading_rows(x, max_elems)
        kept = {"kept": "rows", "count": int(part.shape[0]) if part.dim() else 1}
    if part.numel() * max(part.element_size(), 4) > max_bytes:
        return None, None
    return to_numpy(part, owned), kept


def _leading_rows(x: torch.Tensor, max_elems: int) -> torch.Tensor:
    if x.dim() == 0:
        return x
    row = max(x[0].numel(), 1)
    rows = max(1, max_elems // row)
    part = x[:rows]
    if part.numel() > max_elems:  # one row alone is too big: keep its flat prefix
        part = part.reshape(-1)[:max_elems]
    return part


def describe(x: torch.Tensor) -> dict:
    """Shape, dtype and device of a tensor (never its values)."""
    return {
        "shape": shape_of(x),
        "dtype": str(x.dtype).removeprefix("torch."),
        "device": str(x.device),
        "requires_grad": bool(x.requires_grad),
    }


def shape_of(x: torch.Tensor) -> list[int]:
    """``x``'s shape; a nested tensor's is its number of components (their own shapes
    differ: ``not_captured`` lists them)."""
    return [x.size(0)] if x.is_nested else list(x.shape)


# Components of a nested tensor whose shapes its notice lists.
NESTED_SHAPES = 4


def _nested(x: torch.Tensor) -> str:
    parts = x.unbind()
    shapes = ", ".join("×".join(map(str, p.shape)) or "scalar" for p in parts[:NESTED_SHAPES])
    more = ", …" if len(parts) > NESTED_SHAPES else ""
    return f"nested ({len(parts)} tensors: {shapes}{more})"


_LAYOUTS = {
    torch.sparse_coo: "sparse COO",
    torch.sparse_csr: "sparse CSR",
    torch.sparse_csc: "sparse CSC",
    torch.sparse_bsr: "sparse BSR",
    torch.sparse_bsc: "sparse BSC",
}


def not_captured(x: torch.Tensor) -> str | None:
    """What kind of tensor ``x`` is when tvis keeps neither statistics nor values of it
    (sparse, nested, quantized, meta: no dense values to read), or None."""
    if x.is_nested:
        return _nested(x)
    if x.is_quantized:
        return "quantized"
    if x.device.type == "meta":
        return "meta (no data)"
    if x.layout != torch.strided:
        return _LAYOUTS.get(x.layout, str(x.layout).removeprefix("torch."))
    return None
