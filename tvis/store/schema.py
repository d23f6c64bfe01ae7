"""The records that cross tvis's boundaries, spelled once.

Recorder → run directory → agent → wire → viewer: every room reads and writes the same
msgpack maps. Their fields are declared here as ``TypedDict``s (so a type checker and the
conformance tests catch a field spelled two ways), and every flag a call can carry is one
entry of ``FLAGS``, with the mark the viewer draws for it and what it means. This module is
torch-free and numpy-free: the recorder, the agent, the viewer and the test fixtures all
import it. ``tvis/store/format.py`` describes the files these records live in.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, TypedDict

PHASES = ("data", "forward", "loss", "backward", "optimizer")
"""The training phases, in the order a step runs them; colour in the viewer means a phase."""

Phase = Literal["data", "forward", "loss", "backward", "optimizer"]
CallKind = Literal["module", "function", "loss", "transform", "tokenizer"]

LAYER_KINDS = ("module", "function", "loss")
"""Call kinds that are layers: rows of the layers table and frames of a replay."""

DEAD_ZEROS = 0.9
"""Share of exact zeros above which a layer's units look dead (e.g. ReLU stuck at 0)."""

VANISHING_GRAD = 1e-8
"""‖dL/d(output)‖ below which the gradient reaching a layer is effectively gone."""


# -- flags -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Flag:
    """One thing a call can be flagged with.

    ``severity`` is ``bad`` or ``warn`` for warnings (drawn as ``symbol`` in rows) and
    ``info`` for qualifications that are shown as ``label`` words in the inspector.
    """

    key: str
    severity: Literal["bad", "warn", "info"]
    symbol: str
    label: str
    meaning: str

    @property
    def warning(self) -> bool:
        return self.severity != "info"


NONFINITE = "nonfinite"
DEAD = "dead"
VANISHING = "vanishing"
MIXES_SAMPLES = "mixes_samples"
PATCH_EMBEDDING = "patch_embedding"
TRUNCATED = "truncated"
BWD_INFERRED = "bwd_inferred"
CUDA_EVENTS = "cuda_events"
CARRIED = "carried"
NONFINITE_ORIGIN = "nonfinite_origin"
NONFINITE_GRAD_ORIGIN = "nonfinite_grad_origin"
RAISED = "raised"

FLAGS: dict[str, Flag] = {
    f.key: f
    for f in (
        Flag(NONFINITE, "bad", "✖", "NaN/Inf", "an output holds NaN or Inf values"),
        Flag(
            NONFINITE_ORIGIN,
            "bad",
            "✖",
            "NaN/Inf starts here",
            "the first op or output of the batch to hold NaN/Inf in forward (the run's "
            "anomaly summary names it)",
        ),
        Flag(
            NONFINITE_GRAD_ORIGIN,
            "bad",
            "✖",
            "NaN/Inf gradient starts here",
            "its backward gave the batch's first non-finite gradient (the forward was finite)",
        ),
        Flag(DEAD, "warn", "∅", "dead units?", f"more than {DEAD_ZEROS:.0%} of the output is 0"),
        Flag(VANISHING, "warn", "↓", "vanishing", f"‖dL/d(output)‖ below {VANISHING_GRAD:g}"),
        Flag(
            MIXES_SAMPLES,
            "info",
            "",
            "mixes samples",
            "the layer mixes samples of the batch (BatchNorm in training): per-sample views of "
            "it are approximate",
        ),
        Flag(
            PATCH_EMBEDDING,
            "info",
            "",
            "patch embedding",
            "a conv with kernel = stride (a ViT's patch embedding): no Grad-CAM here",
        ),
        Flag(TRUNCATED, "info", "", "values truncated", "too many arguments: some not captured"),
        Flag(
            BWD_INFERRED,
            "info",
            "",
            "backward time inferred",
            "backward time inferred from when gradients arrived",
        ),
        Flag(CUDA_EVENTS, "info", "", "timed on device", "forward time measured by CUDA events"),
        Flag(
            RAISED,
            "info",
            "",
            "raised",
            "the forward raised an exception (the script caught it): no outputs",
        ),
        Flag(
            CARRIED,
            "info",
            "",
            "carried over",
            "the call began in the previous batch; its inputs are recorded there",
        ),
    )
}
"""Every flag the recorder or agent may attach to a call. A flag missing here is a bug: the
viewer could not draw it (tests check recorded runs against this table)."""

WARNING_ORDER = (NONFINITE_ORIGIN, NONFINITE_GRAD_ORIGIN, NONFINITE, DEAD, VANISHING)
"""Warnings, most severe first."""


def stat_flags(stats: Stats | None, grad_norm: float | None = None) -> list[str]:
    """The warning flags that statistics imply: non-finite, dead, vanishing gradient."""
    found = []
    s = stats or {}
    if (s.get("nan") or 0) + (s.get("inf") or 0) > 0:
        found.append(NONFINITE)
    if (s.get("zeros") or 0) > DEAD_ZEROS and (s.get("numel") or 2) > 1:
        found.append(DEAD)
    if grad_norm is not None and grad_norm < VANISHING_GRAD:
        found.append(VANISHING)
    return found


# -- tensors -----------------------------------------------------------------------------


class Stats(TypedDict, total=False):
    """Statistics of a whole tensor (a derived array may carry ``numel`` only)."""

    numel: int
    mean: float
    std: float
    min: float
    max: float
    absmean: float
    norm: float
    zeros: float
    nan: int
    inf: int
    sampled: int  # estimated from this many evenly spread elements (a partly kept Δw)


class Hist(TypedDict, total=False):
    """A histogram: ``counts`` over equal bins from ``lo`` to ``hi``; ``sampled``: one
    element in that many was counted (large tensors)."""

    lo: float
    hi: float
    counts: list[int]
    sampled: int


class _CutCount(TypedDict, total=False):
    count: int | None  # how many were kept when cut; absent (or None) when whole


class StoredValue(_CutCount):
    """Where a tensor's kept values sit in its blob, and how they were cut."""

    offset: int
    nbytes: int
    dtype: str
    shape: list[int]
    kept: Literal["all", "samples", "rows", "prefix"]


class _Rounded(TypedDict, total=False):
    bits: int  # format 4: stored rounded to this many mantissa bits (absent: exact)


class Prediction(TypedDict, total=False):
    """What a Δw's base was predicted from (tvis/store/predict.py): torch.optim.SGD's
    hyper-parameters at the step, the step's gradient entry, and the step before."""

    rule: Literal["sgd"]
    lr: float
    momentum: float
    dampening: float
    weight_decay: float
    nesterov: bool
    maximize: bool
    grad: int
    prev: dict[str, Any]  # {"step", "param", "lr"}: the buffer from that step's Δw


class EncodedValue(StoredValue, _Rounded, total=False):
    """A step's parameter value, stored encoded (tvis/store/codec.py; format.py says how a
    reader decodes it). A gradient's may be rounded (``bits``); weights and Δw never are."""

    codec: Literal["zstd-shuffle"]
    crc32: int  # of the decoded bits
    base: dict[str, Any]  # {"step", "param"}: a weight XOR-ed against that step's after
    delta: int  # an update: its bits are the weight after the step XOR this weight entry
    predict: Prediction  # format 5: ... XOR SGD's prediction of it instead (predict.py)


class ChunkedValue(StoredValue, _Rounded):
    """An activation's or gradient's values compressed in chunks (tvis/store/chunks.py)."""

    codec: Literal["blosc-zstd-chunks"]
    chunk: int  # elements per chunk, whole trailing planes
    sizes: list[int]  # compressed bytes of each chunk, one after another from offset


class Derivation(TypedDict, total=False):
    """How a value follows from earlier entries of its batch (tvis/store/derived.py)."""

    op: Literal["same", "relu", "relu_grad"]
    of: int
    grad: int
    by: int


class DerivedValue(TypedDict, total=False):
    """A value not in the blob: rebuilt on read from stored neighbours (format 4)."""

    dtype: str
    shape: list[int]
    kept: Literal["all", "samples", "rows", "prefix"]
    count: int | None
    derive: Derivation
    bits: int


class TensorEntry(TypedDict, total=False):
    """One recorded tensor (an activation, a gradient, a parameter value, a derived array)."""

    id: int
    shape: list[int]
    dtype: str
    device: str
    stats: Stats
    hist: Hist | None
    value: StoredValue | EncodedValue | ChunkedValue | DerivedValue | None
    batch_dim: int | None
    batch_dim_inferred: bool
    grad: int | None
    of: int | None
    requires_grad: bool
    derived: bool
    raw_image: str  # a PIL picture kept as it was given: its mode ("RGB", "L", ...)
    # A tensor with no dense values to read: its kind ("sparse COO", "nested (...)",
    # "quantized", "meta (no data)", "unreadable (RuntimeError)"); no statistics, no value.
    not_captured: str
    grad_entry: TensorEntry  # inlined by the agent


class Decoded(TypedDict, total=False):
    """Token ids as text, from the run's vocabulary (the agent's ``call``); ``why`` instead
    when the run knows none."""

    tokens: list[str]
    text: str | None
    sample: int | None  # the sample of an integer tensor that was decoded
    why: str


class Arg(TypedDict, total=False):
    """An input or output of a call: a tensor, a repr, a text, token ids or a picture."""

    name: str
    tensor: int
    repr: str
    text: str
    ids: list[int]  # a list of ints (a hand-written tokenizer's ids), first 4096
    image: int | None
    entry: TensorEntry  # inlined by the agent's ``call``
    decoded: Decoded  # added by the agent's ``call`` when the run knows a vocabulary


# -- calls -------------------------------------------------------------------------------


CallSummary = TypedDict(
    "CallSummary",
    {
        "id": int,
        "parent": int,  # -1 for a root
        "depth": int,
        "kind": CallKind,
        "name": str,  # a module path ("features.0") or a function's qualified name
        "cls": "str | None",
        "phase": Phase,
        "def": "list | None",  # [file, line] where it is defined
        "site": "list | None",  # [file, line] where it was called
        "t0": float,  # ms since the batch began
        "fwd_ms": "float | None",
        "bwd_ms": "float | None",  # inferred from gradient arrival: approximate
        "no_grad": bool,
        "flags": "list[str]",
    },
    total=False,
)
"""What a call and its tree row share (``def`` is a keyword, hence the functional form)."""


class Call(CallSummary, total=False):
    """A module, project function, loss, transform or tokenizer call, as recorded."""

    inputs: list[Arg]
    outputs: list[Arg]


class CallRow(CallSummary, total=False):
    """A call as a tree row (the agent's ``calls`` and ``find``): no arguments, a summary."""

    n_children: int
    out_shape: list[int] | None
    out_stats: Stats | None  # of the first output
    grad_norm: float | None  # ‖dL/d(first output)‖
    path: list[int]  # ancestor ids, root first (``find`` only)


class LayerRow(TypedDict):
    """One row of the layers table (the agent's ``layers``)."""

    id: int
    order: int
    layer: int  # 1-based place in call order among the rows the table holds
    name: str
    cls: str | None
    kind: CallKind
    depth: int
    phase: Phase
    out_shape: list[int] | None
    out_numel: int | None
    std: float | None
    absmean: float | None
    zeros: float | None
    nan: int | None
    inf: int | None
    grad_norm: float | None
    fwd_ms: float | None
    bwd_ms: float | None
    flags: list[str]


LAYER_SORTS = (
    "order",
    "name",
    "cls",
    "kind",
    "depth",
    "out_numel",
    "std",
    "absmean",
    "zeros",
    "grad_norm",
    "fwd_ms",
    "bwd_ms",
)
"""Columns the agent can sort the layers table by."""


# -- batches and steps -------------------------------------------------------------------


class BatchInfo(TypedDict, total=False):
    """A batch (or a light group of no-grad forwards) as the run index lists it.

    ``index`` is the batch's recorded index: light groups leave gaps, so viewers address
    batches by it, never by their position in the list."""

    index: int
    step: int | None
    micro: int
    loss: float | None
    no_grad: bool
    light: bool
    batch_size: int | None
    phase_ms: dict[str, float]
    overhead_ms: float
    n_calls: int
    dropped_calls: int
    repeats: int  # of dropped_calls, a light group's repeated root forwards only counted
    grad_scale: float  # a GradScaler's factor, divided out of the loss and dL/d(activation)


class ParamNorms(TypedDict, total=False):
    w: float | None
    grad: float | None
    update: float | None
    ratio: float | None
    estimated: bool  # ‖Δw‖ (and the ratio) estimated from a sample of a partly kept Δw


class ParamRecord(TypedDict, total=False):
    """One parameter at one optimizer step: the value before the step, its gradient and the
    exact update Δw = p_after − p_before (ids of tensor entries of the step)."""

    name: str
    module: str
    shape: list[int]
    dtype: str
    optimizer: int | None  # None for a manual update (no torch.optim)
    group: int | None
    weight: int
    grad: int | None
    update: int
    norms: ParamNorms
    sparse_grad: bool
    kept: dict[str, Any] | None  # the region kept with values ({"kept", "count"}), or None
    local_grad: bool  # ranks only: this process's backward reached it


class StepInfo(TypedDict, total=False):
    """An optimizer step as the run index lists it."""

    index: int
    batches: list[int]
    loss: float | None
    optimizers: list[dict[str, Any]]
    no_grad: list[str]  # stepped parameters without a gradient
    dropped: dict[str, int]  # {"param_values", "params"}: values --max-bytes left out


class Notice(TypedDict):
    level: str
    text: str


# -- run level ---------------------------------------------------------------------------


class RunMeta(TypedDict, total=False):
    """``meta.json``: who recorded what, when, and how it ended (format.py)."""

    format: int
    status: str
    started: float
    ended: float | None
    script: str | None
    argv: list[str]
    cwd: str
    host: str
    pid: int
    python: str
    torch: str
    settings: dict[str, Any]
    project: str
    exit_code: int | None
    error: str | None
    from_step: int  # --from-step: the first step recorded
    watch: dict[str, Any]  # --watch: checks, steps watched, the anomaly (store/watch.py)
    values: dict[str, Any]  # format 4: {"mantissa_bits": N} when values were stored rounded


class RunIndex(TypedDict, total=False):
    """``run.msgpack``: the run index (format.py)."""

    batches: list[BatchInfo]
    steps: list[StepInfo]
    params: list[dict[str, Any]]
    notices: list[Notice]
    data: dict[str, Any]
    project: str | None
    model: dict[str, Any]


class BatchRecord(TypedDict, total=False):
    """``batches/N/index.msgpack`` (format.py); the insight sections are checked where read."""

    batch: BatchInfo
    calls: list[Call]
    tensors: list[TensorEntry]
    lines: list[dict[str, Any]]
    data: dict[str, Any]
    loss: dict[str, Any]


class StepRecord(TypedDict, total=False):
    """``steps/N/index.msgpack`` (format.py)."""

    step: StepInfo
    params: list[ParamRecord]
    tensors: list[TensorEntry]


# -- checking ----------------------------------------------------------------------------


def unknown_fields(record: dict[str, Any], kind: type) -> list[str]:
    """Keys of ``record`` that the TypedDict ``kind`` does not declare."""
    declared = set(kind.__annotations__)
    return sorted(k for k in record if k not in declared)


def missing_fields(record: dict[str, Any], kind: type) -> list[str]:
    """Required keys of the TypedDict ``kind`` that ``record`` lacks."""
    return sorted(k for k in getattr(kind, "__required_keys__", ()) if k not in record)


# -- loss page ---------------------------------------------------------------------------


class ReductionCheck(TypedDict):
    """The loss's reduction redone by the agent from the stored per-element losses."""

    reduction: str | None
    terms: int  # valid elements summed
    sum: float
    divisor: float  # the count, the summed class weights of a weighted mean, or 1 (sum)
    weighted: bool
    computed: float
    recorded: float
    matches: bool | None  # None when the per-element losses were capped
    complete: bool


class LossColumn(TypedDict):
    """One column of the loss-across-the-run plot: batches ``first``..``last``."""

    first: int
    last: int
    lo: float
    hi: float
    mean: float
    light: bool  # every batch in it is light (evaluation, sampling)


class LossCurve(TypedDict):
    columns: list[LossColumn]
    steps: list[dict]  # {step, batch}: each optimizer step's first batch
    light: list[list[int]]  # [first, last] runs of light batches
    total: int
    lo: float | None
    hi: float | None
