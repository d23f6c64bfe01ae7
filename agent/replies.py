"""Every reply the agent sends the viewer, spelled once.

``tvis/store/schema.py`` declares the records of the run directory; this module declares
what the agent's methods answer (PROTOCOL.md), reusing those records where a reply carries
one as it was recorded. It lives in ``agent/`` because replies are the agent's protocol:
the agent builds them and the viewer reads them through the client side of that protocol
(``client``, ``protocol``, ``target`` and this module are all ``tui/`` may import of the
agent: tests/test_imports.py), while the store, the lowest floor, knows nothing of the agent
(DESIGN.md's rooms). It imports only the store's schema, so either side can import it
cheaply: numpy, whose arrays some replies carry (``Array``), is named for the type checker
and loaded by ``fields`` only (the viewer's first screen is drawn before any array comes).

``REPLIES`` maps each method to its declaration; tests/agent/test_reply_types.py calls every
method the viewer uses over recorded runs and fails on a key the agent sends that is not
declared here, or a required one it leaves out. ``total=False`` marks replies whose keys
depend on what the run recorded.

The hottest replies are also decoded into frozen dataclasses where the viewer receives them
(``tvis.tui.data``, through ``decode_reply``): call-tree rows (``CallsAnswer`` and
``find``'s rows as ``CallRowView``) and replay pages (``ReplayAnswer`` of ``ReplayEvent``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypedDict, cast

from tvis.store.schema import (
    BatchInfo,
    Call,
    CallRow,
    Hist,
    LayerRow,
    LossCurve,
    Notice,
    ParamRecord,
    ReductionCheck,
    RunMeta,
    Stats,
    StepInfo,
    TensorEntry,
)

if TYPE_CHECKING:
    import typing

    import numpy as np

    Array: typing.TypeAlias = np.ndarray
    """A numpy array decoded from the wire (dtype and shape travel with its bytes)."""


def fields(reply: type) -> dict[str, Any]:
    """The declared keys of a reply and their types, ``Array`` as numpy's array type
    (``typing.get_type_hints``, with what is named only for the type checker resolved)."""
    import typing

    import numpy as np

    return typing.get_type_hints(reply, localns={"Array": np.ndarray})


# -- the agent and its runs ----------------------------------------------------------------


class Hello(TypedDict):
    protocol: int
    version: str
    host: str
    pid: int
    root: str
    runs: int
    heartbeat: float


class RunRow(TypedDict, total=False):
    """One run as ``runs`` lists it (the run picker, ``tvis ls``)."""

    run: str
    run_id: str
    status: str
    script: str | None
    host: str | None
    started: float | None
    ended: float | None
    steps: int
    batches: int
    calls: int
    bytes: int
    rank: int | None
    watch: dict[str, Any] | None
    problem: str  # why a run could not be read


class Anomaly(TypedDict, total=False):
    """What a recording closed with (a non-finite value, a loss spike)."""

    kind: str
    batch: int
    step: int
    origin: dict[str, Any]
    text: str


class RunReply(TypedDict, total=False):
    """``run``: the run's index, meta and what its pages can show."""

    run: str
    run_id: str
    status: str
    project: str | None
    rank: int | None
    ranks: list[dict[str, Any]]
    meta: RunMeta
    batches: list[BatchInfo]
    steps: list[StepInfo]
    params: list[dict[str, Any]]
    notices: list[Notice]
    data: dict[str, Any]
    model: dict[str, Any]
    anomalies: list[Anomaly]
    watch: dict[str, Any]


# -- the call tree ---------------------------------------------------------------------------


class CallsReply(TypedDict):
    """``calls``: one page of a call's children (or the roots)."""

    calls: list[CallRow]
    total: int
    dropped: list[dict[str, Any]]  # calls the recorder's cap counted but did not keep


class CallReply(Call, total=False):
    """``call``: a recorded call with its arguments' entries inlined."""

    n_children: int
    path: list[int]
    tokens: list[dict[str, Any]]  # decoded token ids of its integer inputs


class CounterpartReply(TypedDict):
    """``counterpart``: the call at the same place in another batch's tree."""

    call: int | None  # None: not even the first call on the way is in that batch
    path: list[int]  # its ancestors' ids, root first
    exact: bool  # False: the call itself is missing there, ``call`` is its deepest ancestor


class _LayersPage(TypedDict):
    rows: list[LayerRow]
    total: int
    hidden: int


class LayersReply(_LayersPage, total=False):
    located: int | None  # with ``locate``: the asked call's position in this order


class Grid(TypedDict):
    """Where a square patch grid sits in a token sequence."""

    offset: int
    h: int
    w: int


class TimelineBar(TypedDict):
    call: int
    name: str
    phase: str
    lane: str
    depth: int
    t0: float
    t1: float
    approx: bool


class PhaseSpan(TypedDict):
    phase: str
    t0: float
    t1: float


class TimelineReply(TypedDict):
    bars: list[TimelineBar]
    phases: list[PhaseSpan]
    total: int
    total_ms: float


# -- tensors ----------------------------------------------------------------------------------


class TensorReply(TensorEntry, total=False):
    """``tensor``: an entry with its gradient's entry inlined (``grad_entry``)."""


class ViewReply(TypedDict, total=False):
    """``view`` and ``param``: a 2-D window of a tensor, downsampled to the size asked."""

    array: Array
    shape: list[int]
    index: list[int]
    window: list[int]
    lo: float
    hi: float
    downsampled: bool
    kept: str
    sample: int | None
    tensor: int
    name: str  # ``param``
    which: str  # ``param``


class MatrixReply(ViewReply, total=False):
    row_labels: list[str] | None
    row_starts: list[int] | None


class ImageReply(TypedDict):
    array: Array
    shape: list[int]
    normalized: bool
    scale: str


class ArrayReply(TypedDict):
    array: Array
    shape: list[int]
    flat: bool
    kept: str
    truncated: bool
    next: int | None


class KernelGridReply(TypedDict):
    array: Array
    name: str
    which: str
    shape: list[int]
    kernel: list[int]
    filters: int
    channels: int
    first_filter: int
    kept_filters: int
    kept_channels: int
    kept_note: str | None
    downsampled: bool
    lo: float
    hi: float


# -- source -----------------------------------------------------------------------------------


class SourceReply(TypedDict, total=False):
    """``source``: a file's text and, per line number (a string key), what ran there."""

    file: str
    text: str | None
    lines: dict[str, list[dict[str, Any]]]
    why: str


# -- steps and samples ---------------------------------------------------------------------------


class StepReply(TypedDict):
    step: StepInfo
    params: list[ParamRecord]


class SampleInput(TypedDict, total=False):
    kind: str
    tensor: int


class Worst(TypedDict):
    """A sample's worst token."""

    loss: float
    pos: int
    token: str


class SampleRow(TypedDict, total=False):
    """One sample of a batch (``samples``)."""

    sample: int
    input: SampleInput
    loss: float
    p_target: float
    accuracy: float
    target: int
    pred: int
    target_name: str
    pred_name: str
    target_text: str
    pred_text: str
    tokens: int
    worst: Worst


class SamplesReply(TypedDict, total=False):
    batch_size: int
    rows: list[SampleRow]
    per_token: bool
    vocabulary: str


TopClass = TypedDict("TopClass", {"class": int, "name": str, "p": float})
"""One of a sample's most likely classes (``class`` is a keyword: the functional form)."""


MixClass = TypedDict("MixClass", {"class": int, "name": str | None, "weight": float})
"""One class of a soft target and its weight in it."""


class SoftTarget(TypedDict):
    """A sample's target that is a mix of classes (mixup): its heaviest classes, and the
    weight every other class has (label smoothing's share, or 0)."""

    mix: list[MixClass]
    rest: float


class LabelRow(TypedDict, total=False):
    """One label of a multi-label sample: set or not, predicted or not (p > 0.5)."""

    label: int
    name: str | None
    target: bool
    pred: bool
    p: float  # p(label present)
    loss: float


class SampleTableRow(TypedDict, total=False):
    """One row of the Loss page's table: a sample, or a token of the followed sample."""

    sample: int
    pos: int
    loss: float
    p_target: float
    accuracy: float
    correct: bool
    input: int
    input_token: str
    target: int
    pred: int
    target_name: str
    pred_name: str
    target_token: str
    pred_token: str
    pred_text: str
    text: str
    tokens: int
    pad: bool
    top: list[TopClass]
    soft_target: SoftTarget
    worst: Worst
    # A multi-label loss: the sample's labels set and the model's, and each label's values.
    labels: list[int]
    pred_labels: list[int]
    label_names: list[str | None]
    pred_label_names: list[str | None]
    exact: bool
    per_label: list[LabelRow]
    # A CTC loss: the sample's target and greedy transcription (``CtcTexts``).
    target_ids: list[int]
    pred_ids: list[int]
    target_text: str
    cer: float | None


class SampleText(TypedDict):
    input: str
    target: str
    pred: str


class SampleTableReply(TypedDict, total=False):
    kind: str  # "samples", "tokens" or "pixels"
    rows: list[SampleTableRow]
    total: int
    sample: int
    accuracy: float | None
    text: SampleText
    vocabulary: str
    input_vocabulary: str  # a translation model: the source vocabulary decoding its input
    # kind "pixels" (a segmentation loss's followed sample): its plane of ``shape``, every
    # ``stride``-th pixel ``shown`` (classes picked, never averaged; loss as block means)
    shape: list[int]
    shown: list[int]
    stride: int
    slice: str | None  # which plane of a volume ([B, D, H, W] targets)
    target: Array  # int32 class ids
    pred: Array  # int32 argmax classes
    ignored: Array  # uint8: the picked pixel's target is ignore_index
    loss: Array  # float32 block means of the valid pixels' losses
    loss_ignored: Array  # uint8: a block without a valid pixel
    loss_mean: float | None
    classes: int | None
    ignore_index: int | None
    valid_pixels: int
    pixels: int
    present: list[int]  # the classes the pictures show
    names: list[str | None]  # their names, when the run has them


# -- the loss page ---------------------------------------------------------------------------------


LossCall = TypedDict(
    "LossCall",
    {
        "id": int,
        "name": str,
        "kind": str,
        "cls": "str | None",
        "def": "list[Any] | None",  # a keyword, hence the functional form
        "site": "list[Any] | None",
    },
)


class Confusion(TypedDict):
    classes: list[int]
    names: list[str]
    matrix: Array
    accuracy: float
    samples: int
    batches: list[int]


class ClassIoU(TypedDict):
    """Each class's intersection over union of target and prediction (valid pixels)."""

    classes: list[int]
    names: list[str | None]
    iou: list[float]
    pixels: list[int]  # the class's target pixels
    mean_iou: float | None
    accuracy: float | None  # pixel accuracy
    total: int


class RunIoU(ClassIoU):
    batches: list[int]


class PixelIoU(TypedDict):
    batch: ClassIoU | None
    run: RunIoU | None


class _WorstBase(TypedDict):
    sample: int
    loss: float | None  # None: the loss does not split by sample
    p_target: float
    neg_log_p: float


class WorstSample(_WorstBase, total=False):
    # A multi-label loss: the sample's labels set and the model's (p > 0.5).
    labels: list[int]
    pred_labels: list[int]
    label_names: list[str | None]
    pred_label_names: list[str | None]
    exact: bool  # also a CTC loss's: the transcription is the target
    # A CTC loss: the target's ids and the greedy transcription's (repeats collapsed,
    # blanks dropped), as text with the run's character map, and edits per target character.
    target_ids: list[int]
    pred_ids: list[int]
    target_text: str | None
    pred_text: str | None
    cer: float | None


class CtcTexts(TypedDict):
    """How a CTC loss's rows were decoded: its blank, its classes, and the character map
    used (or why there is none)."""

    blank: int
    classes: int
    vocabulary: str | None


class LossTerm(TypedDict, total=False):
    """One term of the scalar backward ran on: its loss call, value and weight in the sum."""

    call: int | None
    fn: str
    value: float
    weight: float


class LossDetailReply(TypedDict, total=False):
    """``loss_detail``: the loss call of a batch, its per-element losses and the checks."""

    call: LossCall
    fn: str
    value: float
    backward_loss: float
    reduction: str
    reduction_check: ReductionCheck
    ignore_index: int
    label_smoothing: float
    merged: bool
    per_token: bool
    per_pixel: bool
    per_element: Array
    per_element_shape: list[int]
    per_sample_how: str | None
    per_sample_why: str | None
    terms: list[LossTerm] | None
    rest: float | None
    contrastive: bool | None  # targets are each sample's own pair: no classes, no confusion
    # targets are mixes of two classes (mixup) or distributions over them: no confusion
    soft_target: Literal["mix", "distribution"] | None
    multilabel: bool | None  # 0/1 targets per label: sets of labels, no confusion
    ctc: CtcTexts | None  # a CTC loss: its rows have target and transcription texts
    picked: dict[str, Any] | None
    valid: Array
    valid_mean: float
    n_valid: int
    hist: Hist
    hist_of: Literal["element", "sample"] | None
    residual_hist: Hist | None
    tokens_per_sample: int | None
    worst: list[WorstSample]
    confusion: Confusion
    iou: PixelIoU
    why: str


# -- replay ----------------------------------------------------------------------------------------


ReplayDetail = Literal["layer", "call"]
REPLAY_DETAILS: tuple[ReplayDetail, ...] = ("layer", "call")
"""Event lists a recording plays as: its layers, or every module and function call."""

REPLAY_PAGE = 500
"""Events a viewer asks for at once: a few KiB a page; a small model's recording is one."""


class ReplayQuery(TypedDict):
    """The ``replay`` method's parameters: the one spelling of its paging keywords (the
    agent's signature is checked against it by tests/agent/test_reply_types.py)."""

    run: str
    sample: int  # the followed sample
    detail: ReplayDetail
    offset: int  # the first event sent
    limit: int  # events sent at most
    expand: list[int]  # light groups (by their first batch) opened into their calls
    whole: bool  # build every event before answering (else: the page, then ``complete``)


def replay_query(
    run: str,
    sample: int,
    detail: ReplayDetail,
    expand: list[int],
    offset: int = 0,
    whole: bool = False,
) -> ReplayQuery:
    """The page of ``REPLAY_PAGE`` events starting at ``offset``; without ``whole`` the
    agent answers once that page is built (``ReplayAnswer.complete`` says if the rest is)."""
    return ReplayQuery(
        run=run,
        sample=sample,
        detail=detail,
        offset=offset,
        limit=REPLAY_PAGE,
        expand=expand,
        whole=whole,
    )


class TopParam(TypedDict):
    name: str
    w: float | None
    update: float | None
    ratio: float | None


class Event(TypedDict, total=False):
    """One replay event as it travels (``ReplayEvent`` is its decoded form)."""

    seq: int
    kind: str  # batch, stage, layer, loss, grad, update, light, crash
    phase: str
    batch: int
    step: int | None
    micro: int
    name: str
    call: int
    cls: str | None
    depth: int
    tensor: int
    grad: int
    shape: list[int]
    flags: list[str]
    absmean: float | None
    grad_norm: float | None
    fn: str
    loss: float | None
    value: float | None
    reduction: str
    optimizer: int | None
    param_group: int
    n_params: int
    lr: float | None
    top: list[TopParam]
    batches: list[int]  # light: the batches of the group
    group: int  # light, and an opened group's calls: the group's first batch
    open: bool  # light: opened into its calls
    n_calls: int  # light: calls in the group
    repeats: int  # light: repeated forwards counted, not recorded
    dropped: int  # light: calls past its cap, counted, not recorded


class OutlineRun(TypedDict):
    """A run of events of one phase in one batch (the scrubber's colours)."""

    batch: int
    phase: str
    start: int
    count: int


class ReplayBatch(TypedDict):
    batch: int
    step: int | None
    micro: int
    start: int
    count: int
    light: bool
    loss: float | None
    note: str | None


class ReplayReply(TypedDict):
    total: int  # events built; all of the run's when ``complete``
    complete: bool  # false: total, outline, batches and missing cover the events built so far
    sample: int
    detail: str
    status: str
    outline: list[OutlineRun]
    batches: list[ReplayBatch]
    missing: list[str]
    events: list[Event]


class OnImageReply(TypedDict, total=False):
    """``on_image``: where a layer is active on the followed sample's picture or tokens."""

    applies: bool
    why: str
    call: int
    tensor: int
    sample: int
    grad: bool
    kind: str
    image: Array | None
    map: Array
    map_shape: list[int]
    strength: Array
    low: float
    peak: float
    grid: Grid | None
    query: int | None
    tokens: list[str]
    total: int
    vocab_why: str | None


class NeuronsReply(TypedDict, total=False):
    call: int
    tensor: int
    sample: int
    grad: bool
    kind: str  # maps or values
    shape: list[int]
    units: list[int]
    offset: int
    total: int
    lo: float
    hi: float
    order: str
    position: int | None
    maps: list[Array]
    map_shape: list[int]
    values: list[float]
    scores: list[float]
    labels: list[str] | None


class Thumb(TypedDict, total=False):
    """A layer's small map (``why`` instead when it has none, e.g. statistics only)."""

    call: int
    array: Array
    lo: float
    hi: float
    why: str


class ThumbsReply(TypedDict):
    sample: int
    grad: bool
    thumbs: list[Thumb]


# -- insights --------------------------------------------------------------------------------------


class EmbeddingTable(TypedDict):
    param: str
    module: str
    rows: int
    dim: int
    padding_idx: int | None


class InsightsReply(TypedDict, total=False):
    """``insights``: which Insights views the run can show, and why not."""

    attention: bool
    attention_absent: str | None
    attention_layers: list[str]
    gradcam: bool
    gradcam_layers: list[str]
    embeddings: bool
    repr_layers: list[str]
    tables: list[EmbeddingTable]


class AttentionReply(TypedDict, total=False):
    layer: int
    layers: list[str]
    module: str
    head: int | None
    heads: int
    sample: int
    rollout: bool
    causal: bool
    recomputed: str | None
    map: Array
    shape: list[int]
    downsampled: bool
    tokens: list[str]
    grid: Grid | None


class AttentionHeadsReply(TypedDict):
    layer: int
    module: str
    sample: int
    causal: bool
    recomputed: str | None
    maps: Array
    entropy: Array
    order: Array
    shape: list[int]


class AttentionOverlayReply(TypedDict):
    layer: int
    module: str
    head: int | None
    sample: int
    rollout: bool
    recomputed: str | None
    query: int
    query_label: str
    image: Array
    map: Array
    patches: Array
    peak: float
    grid: Grid


GradcamReply = TypedDict(
    "GradcamReply",
    {
        "layer": str,
        "layers": "list[str]",
        "choices": "list[str]",
        "which": str,
        "sample": int,
        "image": "Array",
        "map": "Array",
        "map_shape": "list[int]",
        "p": float,
        "peak": float,
        "class": int,  # a keyword, hence the functional form
        "class_name": str,
        "approximate": bool,
    },
    total=False,
)


class GradcamGridReply(TypedDict):
    layer: str
    layers: list[str]
    which: str
    sample: int | None
    kept: int
    cells: list[GradcamReply]


class EmbeddingsReply(TypedDict, total=False):
    kind: str
    layer: str
    layers: list[str]
    points: Array
    explained: Array
    labels: Array
    label_kind: str
    label_names: dict[int, str]
    batch: Array
    sample: Array
    batches: list[int]
    sampling: str
    total: int
    why: str
    # kind "table": the rows of an embedding table (a token's vector), not activations
    table: str
    param: str
    step: int
    rows: Array
    tokens: list[str]
    vocab: bool  # the rows are labelled by the run's vocabulary
    stored_rows: int


class PipelineValue(TypedDict, total=False):
    """The sample as it enters or leaves a pipeline stage."""

    kind: str
    tensor: int
    shape: list[int]
    dtype: str
    array: Array
    normalized: bool
    scale: str
    ids: list[int]
    tokens: list[str]
    text: str
    stats: Stats  # when no values were kept


class PipelineStage(TypedDict):
    call: int
    name: str
    kind: str
    output: PipelineValue


class PipelineReply(TypedDict):
    index: int
    sample: int
    raw: PipelineValue | None
    input: PipelineValue
    stages: list[PipelineStage]
    tokens: list[str]


# -- ranks and watched runs ------------------------------------------------------------------------


class RankRow(TypedDict, total=False):
    """One rank of a multi-process recording (``error`` alone when unreadable)."""

    rank: int
    run: str
    status: str
    full: bool  # recorded with values (``--ranks all`` or rank 0)
    host: str | None
    pid: int | None
    steps: int
    batches: int
    ended: float | None
    error: str | None
    peer_failure: bool


class RanksReply(TypedDict):
    """``ranks``: a multi-process recording side by side (tui/pages/ranks.py)."""

    group: str
    world_size: int | None
    launcher: str | None
    full_ranks: list[int] | None
    total: int
    ranks: list[RankRow]
    first_failure: dict[str, Any] | None
    loss: list[dict[str, Any]]
    phases: list[dict[str, Any]]
    straggler: dict[str, Any] | None
    same_batches: dict[str, Any]
    grads: dict[str, Any]
    unused: list[dict[str, Any]]


class RankParamRow(TypedDict):
    name: str
    ranks: list[int]
    norms: list[float | None]
    digests: list[str | None]
    has_grad: list[bool]
    same: bool | None  # None: fewer than two ranks have its gradient


class RankParamsReply(TypedDict):
    step: int
    ranks: list[int]
    total: int
    rows: list[RankParamRow]


class WatchColumn(TypedDict):
    """Steps ``first``..``last`` of a watched run, as one column of the Loss page's plot."""

    first: int
    last: int
    loss: float | None
    grad_norm: float | None  # the column's largest: a spike is what one looks for
    lr: float | None
    bad: bool  # a non-finite value in it


class WatchSeriesReply(TypedDict):
    """``watch_series``: a watched run's series over every step (None: not a watched run)."""

    steps: int
    columns: list[WatchColumn]
    anomaly: dict[str, Any] | None
    recorded: list[int] | None  # [first, last] step recorded with values
    checks: dict[str, Any] | None
    lo: dict[str, float | None]
    hi: dict[str, float | None]
    log: dict[str, bool]  # per series: drawn on a log scale


REPLIES: dict[str, Any] = {
    "hello": Hello,
    "runs": list[RunRow],
    "run": RunReply,
    "calls": CallsReply,
    "call": CallReply,
    "counterpart": CounterpartReply,
    "find": list[CallRow],
    "layers": LayersReply,
    "timeline": TimelineReply,
    "tensor": TensorReply,
    "view": ViewReply,
    "image": ImageReply,
    "array": ArrayReply,
    "sources": list[str],
    "source": SourceReply,
    "step": StepReply,
    "param": ViewReply,
    "samples": SamplesReply,
    "replay": ReplayReply,
    "on_image": OnImageReply,
    "neurons": NeuronsReply,
    "thumbs": ThumbsReply,
    "ranks": RanksReply,
    "rank_params": RankParamsReply,
    "watch_series": WatchSeriesReply | None,
    "kernel_grid": KernelGridReply,
    "matrix": MatrixReply,
    "insights": InsightsReply,
    "attention": AttentionReply,
    "attention_heads": AttentionHeadsReply,
    "attention_overlay": AttentionOverlayReply,
    "embeddings": EmbeddingsReply,
    "gradcam": GradcamReply,
    "gradcam_grid": GradcamGridReply,
    "sample_table": SampleTableReply,
    "loss_detail": LossDetailReply,
    "loss_curve": LossCurve,
    "pipeline": PipelineReply,
}
"""Each method the viewer calls and the declaration of its reply (``read`` answers raw
bytes)."""


# -- decoded at the client edge --------------------------------------------------------------------


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _int_or(value: Any, default: int) -> int:
    found = _int_or_none(value)
    return default if found is None else found


def _float_or_none(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _ints(value: Any) -> tuple[int, ...] | None:
    if not isinstance(value, (list, tuple)):
        return None
    return tuple(v for v in value if isinstance(v, int))


def _maps(value: Any) -> list[Any]:
    """The maps of a list (a declared row type to the reader; anything else dropped)."""
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _strs(value: Any) -> tuple[str, ...]:
    return tuple(v for v in value if isinstance(v, str)) if isinstance(value, (list, tuple)) else ()


@dataclass(frozen=True)
class ReplayEvent:
    """One replay event, decoded once where the viewer receives it (``Event`` on the wire).

    A field the event's kind does not carry is None (or empty); ``raw`` keeps the map as it
    came, for a light group's ``batches``."""

    seq: int
    kind: str
    phase: str
    batch: int
    name: str
    step: int | None = None
    micro: int = 0
    call: int | None = None
    cls: str | None = None
    depth: int = 0
    tensor: int | None = None
    grad: int | None = None
    shape: tuple[int, ...] | None = None
    flags: tuple[str, ...] = ()
    absmean: float | None = None
    grad_norm: float | None = None
    loss: float | None = None
    value: float | None = None
    fn: str | None = None
    reduction: str | None = None
    lr: float | None = None
    n_params: int | None = None
    optimizer: int | None = None
    param_group: int | None = None
    top: tuple[TopParam, ...] = ()
    group: int | None = None
    open: bool = False
    n_calls: int = 0
    repeats: int = 0
    dropped: int = 0
    raw: Any = None  # the Event map as it came (read only)

    @classmethod
    def decode(cls, e: Any) -> ReplayEvent:
        if not isinstance(e, dict):
            return cls(seq=0, kind="?", phase="", batch=0, name="", raw={})
        return cls(
            seq=_int_or_none(e.get("seq")) or 0,
            kind=str(e.get("kind") or "?"),
            phase=str(e.get("phase") or ""),
            batch=_int_or_none(e.get("batch")) or 0,
            name=str(e.get("name") or ""),
            step=_int_or_none(e.get("step")),
            micro=_int_or_none(e.get("micro")) or 0,
            call=_int_or_none(e.get("call")),
            cls=_str_or_none(e.get("cls")),
            depth=_int_or_none(e.get("depth")) or 0,
            tensor=_int_or_none(e.get("tensor")),
            grad=_int_or_none(e.get("grad")),
            shape=_ints(e.get("shape")),
            flags=_strs(e.get("flags")),
            absmean=_float_or_none(e.get("absmean")),
            grad_norm=_float_or_none(e.get("grad_norm")),
            loss=_float_or_none(e.get("loss")),
            value=_float_or_none(e.get("value")),
            fn=_str_or_none(e.get("fn")),
            reduction=_str_or_none(e.get("reduction")),
            lr=_float_or_none(e.get("lr")),
            n_params=_int_or_none(e.get("n_params")),
            optimizer=_int_or_none(e.get("optimizer")),
            param_group=_int_or_none(e.get("param_group")),
            top=tuple(_maps(e.get("top"))),
            group=_int_or_none(e.get("group")),
            open=e.get("open") is True,
            n_calls=_int_or_none(e.get("n_calls")) or 0,
            repeats=_int_or_none(e.get("repeats")) or 0,
            dropped=_int_or_none(e.get("dropped")) or 0,
            raw=e,
        )


@dataclass(frozen=True)
class ReplayAnswer:
    """A ``replay`` reply decoded: its events as ``ReplayEvent``s (the outline and batch rows
    stay the declared maps: the viewer only reads their numbers)."""

    total: int
    complete: bool
    sample: int
    detail: ReplayDetail
    status: str
    outline: tuple[OutlineRun, ...]
    batches: tuple[ReplayBatch, ...]
    missing: tuple[str, ...]
    events: tuple[ReplayEvent, ...]

    @classmethod
    def decode(cls, reply: Any) -> ReplayAnswer:
        r = reply if isinstance(reply, dict) else {}
        return cls(
            total=_int_or_none(r.get("total")) or 0,
            complete=r.get("complete") is not False,
            sample=_int_or_none(r.get("sample")) or 0,
            detail="call" if r.get("detail") == "call" else "layer",
            status=str(r.get("status") or ""),
            outline=tuple(_maps(r.get("outline"))),
            batches=tuple(_maps(r.get("batches"))),
            missing=_strs(r.get("missing")),
            events=tuple(ReplayEvent.decode(e) for e in r.get("events") or []),
        )


@dataclass(frozen=True)
class CallRowView:
    """A call-tree row (``CallRow`` on the wire), decoded once where the viewer receives it.

    ``raw`` keeps the map as it came, for the inspector's header, which shows every field."""

    id: int
    parent: int
    depth: int
    kind: str
    name: str
    cls: str | None
    phase: str
    n_children: int
    fwd_ms: float | None
    bwd_ms: float | None
    grad_norm: float | None
    out_shape: tuple[int, ...] | None
    out_stats: Stats | None
    flags: tuple[str, ...]
    path: tuple[int, ...] | None  # ancestor ids, root first (``find`` only)
    raw: CallRow

    @property
    def label(self) -> str:
        """How a call is named in lists: its module path or function name, else its class."""
        return self.name or self.cls or f"call {self.id}"

    @classmethod
    def decode(cls, row: Any) -> CallRowView:
        r: Any = row if isinstance(row, dict) else {}
        stats = r.get("out_stats")
        return cls(
            id=_int_or(r.get("id"), -1),
            parent=_int_or(r.get("parent"), -1),
            depth=_int_or_none(r.get("depth")) or 0,
            kind=str(r.get("kind") or ""),
            name=str(r.get("name") or ""),
            cls=_str_or_none(r.get("cls")),
            phase=str(r.get("phase") or ""),
            n_children=_int_or_none(r.get("n_children")) or 0,
            fwd_ms=_float_or_none(r.get("fwd_ms")),
            bwd_ms=_float_or_none(r.get("bwd_ms")),
            grad_norm=_float_or_none(r.get("grad_norm")),
            out_shape=_ints(r.get("out_shape")),
            out_stats=cast(Stats, stats) if isinstance(stats, dict) else None,
            flags=_strs(r.get("flags")),
            path=_ints(r.get("path")),
            raw=r,
        )


@dataclass(frozen=True)
class CallsAnswer:
    """A ``calls`` reply decoded: one page of a call's children (or the roots)."""

    calls: tuple[CallRowView, ...]
    total: int
    dropped: tuple[dict[str, Any], ...]

    @classmethod
    def decode(cls, reply: Any) -> CallsAnswer:
        r = reply if isinstance(reply, dict) else {}
        calls = tuple(CallRowView.decode(c) for c in _maps(r.get("calls")))
        total = _int_or_none(r.get("total"))
        return cls(calls, len(calls) if total is None else total, tuple(_maps(r.get("dropped"))))


def decode_found(reply: Any) -> tuple[CallRowView, ...]:
    """A ``find`` reply decoded: the matching calls, each with its ``path``."""
    return tuple(CallRowView.decode(c) for c in _maps(reply))


DECODERS: dict[str, Any] = {
    "replay": ReplayAnswer.decode,
    "calls": CallsAnswer.decode,
    "find": decode_found,
}
"""Replies the viewer reads as frozen dataclasses, decoded once as they arrive."""


def decode_reply(method: str, reply: Any) -> Any:
    """``reply`` as the viewer reads it: decoded where ``DECODERS`` names the method."""
    decoder = DECODERS.get(method)
    return reply if decoder is None else decoder(reply)
