"""The run-directory format: names, version, and the encoding of records.

A run is one folder::

    <run>/
      meta.json              small, human-readable: who/what/when, status, settings
      run.msgpack            the run index: batches, steps, params table, notices, data info
      sources.msgpack        {path: text} snapshot of every project file that ran
      watch.msgpack          `tvis run --watch` only: one light record per step (watch.py)
      batches/000000/        one folder per batch, written whole then renamed into place
        index.msgpack        {"batch": {...}, "calls": [...], "tensors": [...], "lines": [...], ...}
        blob.bin             little-endian arrays, each at a known offset (compressed in
                             chunks since format 3; raw before)
      steps/000000/          one folder per optimizer step: parameter records + their values
        index.msgpack
        blob.bin

Every file is written to a temporary name (``.<name>.tmp``, or ``.<name>.<pid>.tmp`` for a
file) and renamed, so a reader never sees half a file. The recorder waits for the disk when a
step ends, so a run killed at any moment keeps every finished step and its batches; only the
batches of the step in progress may be missing. Readers skip temp names; ``tvis ls`` removes
the ones a recorder that is gone left behind (``reader.remove_stale_temps``), including
``.finalize-reserve.tmp``, space set aside so a full disk still takes the final records.
Batches and steps that never reached a full disk are left out of the run index.

A run recorded with ``--from-step N`` numbers its steps from N (``meta.json`` has
``"from_step": N``). A ``--watch`` run's ``meta.json`` has ``"watch": {"checks", "factor",
"window", "steps", "anomaly", "seconds"}``: the watch process writes it (with
``watch.msgpack``) and, when it stopped at an anomaly, the re-run that records the
anomalous step writes the rest of the run into the same folder and keeps that key.

Call flags include ``raised``: the forward raised (the call has no outputs).

Readers check the types of every record once, when it is loaded, against its shape in
``schema.py`` (``RunMeta``, ``RunIndex``, ``BatchRecord``, ``StepRecord``; only fields a
record has are checked): a run whose meta.json or run index does not fit is listed as
``unreadable`` with one sentence naming the file and field; a batch or step that does not
fit is refused with that sentence, and the rest of the run stays readable.

Records are plain msgpack maps (no pickle, no ext types). A tensor record ("tensor
entry") looks like::

    {"id": 7, "shape": [8, 16, 32, 32], "dtype": "float32", "device": "cpu",
     "stats": {"numel", "mean", "std", "min", "max", "absmean", "norm", "zeros", "nan", "inf"},
     "hist": {"lo": float, "hi": float, "counts": [32 ints], "sampled"?: int},
     "value": {"offset": int, "nbytes": int, "dtype": "<f4", "shape": [...],
               "kept": "all" | "samples" | "rows", "count": int} | None,
     "batch_dim": 0 | None, "batch_dim_inferred": bool,
     "grad": <id of the gradient's tensor entry> | None, "of": <id this is the gradient of> | None}

A tensor tvis cannot read densely (sparse, nested, quantized, meta) has
``"not_captured": "sparse COO"`` (its kind), its shape (a nested tensor's: its number of
components), no statistics beyond ``numel`` and no value.

Since format 3 a batch's values (activations, gradients, derived arrays) are stored
compressed in chunks (tvis/store/chunks.py), and their value map says so::

    "value": {..., "codec": "blosc-zstd-chunks",
              "chunk": int,          # elements per chunk: whole trailing planes (a channel,
                                     # a block of rows), about 256 KiB raw; the last may be short
              "sizes": [int, ...]}   # compressed bytes of each chunk, back to back from offset

Each chunk is a Blosc frame (byte shuffle, zstd; bit shuffle for values stored rounded,
format 4) of its elements in C order, so a reader
decodes only the chunks holding what it reads. A value without ``codec`` is raw bytes at
``offset`` (format 2 and earlier, and non-numeric dtypes); readers read both.

Since format 4 activations and gradients are stored rounded to a number of mantissa bits
(tvis/store/rounding.py: NaN, Inf and float range kept exactly) unless the run was
recorded with ``--exact``; ``meta.json`` then says ``"values": {"mantissa_bits": 10}``,
and each rounded value's map ``"bits": 10``.
Statistics and histograms are computed before rounding. The data pipeline's tensors, the
loss call's inputs and outputs, derived arrays (all but the pooled representations of
``repr``, which are rounded as the activations they pool) and every integer stay exact. A value that
follows exactly from a stored neighbour in the same batch (a ReLU's output, its input's
gradient, the gradients a residual add passed on, a copy of an earlier entry;
tvis/store/derived.py) is not in the blob; its value map says how to rebuild it::

    "value": {"kept", "count"?, "dtype", "shape",
              "derive": {"op": "same" | "relu", "of": id}
                      | {"op": "relu_grad", "grad": id, "by": id}}

A recipe works elementwise on the values in C order: its sources have the value's dtype
and number of elements, not always its shape (a dataset item [3, H, W] and the batch's
one kept sample [1, 3, H, W]).

``value.shape`` is the stored (possibly sliced) shape; ``kept`` says how it was cut:
``all`` (whole tensor), ``samples`` (first ``count`` entries along ``batch_dim``) or
``rows`` (first ``count`` entries along dim 0, for tensors without a batch dim).
Statistics always cover the whole tensor; a large tensor's histogram counts a spread-out
subset of about one element in ``sampled``.

A batch index (``batches/N/index.msgpack``)::

    {"batch": {"index", "step", "micro" (position within its step), "loss": float | None,
               "no_grad": bool, "light": bool (values not kept), "batch_size": int | None,
               "phase_ms": {"data", "forward", "loss", "backward", "optimizer"},
               "overhead_ms": float (tvis's own work, already subtracted), "n_calls": int,
               "dropped_calls": int, "repeats"?: int (of them, repeated forwards counted),
               "digest": str (of the collated batch; ranks of a group only),
               "grad_scale"?: float (backward ran on a GradScaler's loss × grad_scale: "loss"
                              and every dL/d(activation) are recorded divided by it)},
     "calls": [call, ...],            # pre-order: a parent comes before its children
     "tensors": [tensor entry, ...],
     "lines": [{"file", "line", "op", "shape", "dtype", "count", "ms",
                "call": id | None,   # the call running the line; None: a call of an
                                     # earlier batch (a loop in main()) or top-level code
                "no_grad"?: true,    # the line ran with gradients off (evaluation)
                "flags"?: ["nonfinite_origin" | "nonfinite_grad_origin"]}, ...],
     "dropped_sites"?: [{"name", "cls", "parent", "count",  # calls the call cap left out
                         "why"?: "repeat", "recorded"?: int}],
                     # (a light group's modules; a training batch's project helpers past
                     # 20,000 calls), per name and the recorded call they ran inside
                     # (parent: -1 at the top); batch.dropped_calls in all. ``why:
                     # "repeat"``: root forwards of a light group made from a line that
                     # already had ``recorded`` forwards recorded in full, counted with
                     # nothing inside them recorded (batch.repeats in all)
     "anomalies"?: {"nonfinite"?: origin, "nonfinite_grad"?: origin},
     "data": {"batch": [arg, ...], "indices": [dataset index, ...],
              "items": [{"index", "calls": [first, end)}, ...]},
     "loss": {"call", "fn", "reduction", "ignore_index", "value", "per_element": id,
              "valid": id, "per_sample": [float], "merged": bool, "target": id, "pred": id,
              "p_target": id, "top_i": id, "top_p": id, "classes": int, "shape": [...],
              "soft_target"?: "mix" | "distribution", "target_top_i": id,
              "target_top_p": id, "target_floor"?: id,  # a target that is a distribution
              # over the classes: each sample's 3 heaviest classes and their weights; a mix
              # (mixup: two classes over an equal share for the others) that share too
              "weighted": bool, "weight_sum": float,  # weight_sum: a weighted CE/NLL
                                                      # mean's divisor (class targets)
              "multilabel"?: bool, "labels"?: id, "pred_labels"?: id,  # a binary loss over
              # rows of 0/1 targets ([B, C], ``shape``): each sample's labels set (uint8
              # 0/1) and the model's (p > 0.5)
              "per_sample_how"?: str, "per_sample_why"?: str,  # a loss of the script's own
              # (found from the scalar backward ran on): how its per-sample losses were had
              # exactly (re-applied per sample, or a reduction's input), or why they were not
              "terms"?: [{"call": id | None, "fn", "value", "weight"?}], "rest"?: float | None},
              # the loss terms the scalar backward ran on was made from when it is not the
              # call itself (a sum of losses, a scaled loss): each term's value and, when the
              # scalar is a weighted sum of them, its weight; ``rest``: what the weighted
              # terms leave of the scalar (terms no loss call made), None when not linear
     "gradcam": [{"call", "layer", "which": "pred" | "true", "tensor": id, "approximate"}],
     "attention": [{"call", "module", "tensor": id, "shape", "heads"}],
     "repr": [{"call", "module", "depth", "tensor": id}],   # pooled, one row per sample
     "tokens": {...}}                 # texts, ids and token strings of tokenizer calls

Every project line that ran has a ``lines`` entry: ``op`` and ``shape`` are its last
result — the last torch op it ran, or the module or project function it called (``op`` is
then the call's name and ``ms`` its forward time). A training batch ends with its
optimizer step and is written then, with the step (or, when a project call of the batch
is still open — a ``train_step()`` that steps — when that call returns). Lines and calls
that run between batches (``zero_grad()`` after the step, the loop fetching the next
batch) belong to the next training batch; lines after the last one (code after the loop
of a script that ended before its last step) join the last, whose record is written again
when the run ends.

``anomalies`` names where the batch first went non-finite::

    origin = {"phase": "forward" | "backward",
              "kind": "op" | "module" | "input" | "grad",
              "op": "log" | module name | "x of Net" | "backward of fc2",
              "call": id | None, "file": str | None, "line": int | None,
              "path": "model (Net) › fc2 (Linear)", "tensor"?: id (backward: the
              activation whose gradient first went non-finite)}

``nonfinite`` is the first op, module output or input batch holding NaN/Inf in forward
(its call and line carry the flag ``nonfinite_origin``); when the forward was finite,
``nonfinite_grad`` is the first activation gradient that arrived non-finite, named by the
line or module that consumed the activation (flag ``nonfinite_grad_origin``).

A call::

    {"id", "parent" (-1 for a root), "depth",
     "kind": "module" | "function" | "loss" | "transform" | "tokenizer",
     "name": "features.0" (module path) or a function's qualified name, "cls": "Conv2d" | None,
     "phase": "data" | "forward" | "loss" | "backward" | "optimizer",
     "def": [file, line] | None, "site": [file, line] | None,
     "inputs": [arg, ...], "outputs": [arg, ...],
     "t0": ms since the batch began, "fwd_ms": float,
     "bwd_ms": float | None (inferred from gradient arrival: approximate),
     "no_grad": bool, "flags": [str, ...]}

    arg = {"name": "x", "tensor": id} | {"name": "dim", "repr": "1"}
        | {"name": "text", "text": "..."} | {"name": "img", "image": id}
        | {"name": "return", "repr": "list[12]", "ids": [int, ...]}  # a list of ints (token
                                                    # ids, first 4096), decoded by the viewer

The run's ``data.tokenizer`` is ``{"cls", "pad_id", "specials": [ids of special tokens]}``
(from the first tokenizer call, or the dataset's ``tokenizer`` with an ``itos`` vocabulary).

Entries with ``"derived": true`` are arrays tvis computed (per-sample loss, p(target),
Grad-CAM maps, pooled representations); they and the tensors of dataset items past the kept
samples may carry statistics of ``{"numel"}`` only.

Files are project-relative for project files (keys of sources.msgpack), absolute otherwise.

A step index (``steps/N/index.msgpack``)::

    {"step": {"index", "batches": [batch indices], "loss": float | None,
              "optimizers": [{"cls", "groups": [{hyper-parameters}]}],
              "no_grad"?: [names of stepped parameters without a gradient],
              "dropped"?: {"param_values": int, "params": int}},  # --max-bytes cut in
     "params": [{"name", "module", "shape", "dtype", "optimizer",
                 "weight": id, "grad": id | None, "update": id, "sparse_grad": bool,
                 "kept": {"kept": "all" | "rows" | "prefix", "count"?} | None,
                 "norms": {"w", "grad", "update", "ratio", "estimated"?: true},
                 "local_grad": bool}],   # ranks only: this process's backward reached it
     "tensors": [tensor entry, ...]}   # "weight" is the value before the step;
                                       # "update" is p_after - p_before exactly

Parameter values are exact but not always whole. Every parameter keeps the same *region*
every step: the whole tensor, its first ``count`` rows (``rows``), or the first ``count``
elements of its first row (``prefix``). The regions are planned once, within
``--param-elems`` elements per step: a few rows of every parameter first, then whole
tensors smallest first, the rest as rows of the next. ``kept`` is None when --max-bytes
left no room (the step's ``dropped`` counts them). Statistics of the weight and gradient
always cover the whole tensor; Δw's statistics of a partly kept parameter are estimated
from a fixed sample of about 16k evenly spread elements (its stats carry ``"sampled": n``,
its norm scaled to the whole tensor, and the param's norms say ``"estimated": true``).

Step values are encoded (tvis/store/codec.py) and their value map says how::

    "value": {"offset", "nbytes" (bytes in the blob), "dtype", "shape", "kept", "count"?,
              "codec": "zstd-shuffle",          # bytes regrouped by significance, zstd
              "crc32": int,                     # of the decoded bits (see below)
              "base"?: {"step": int, "param": name},   # weight: XOR against that step's
                                                       # weight after the step
              "delta"?: id,                     # update: XOR against the weight entry
              "predict"?: {"rule": "sgd", "lr", "momentum", "dampening", "weight_decay",
                           "nesterov", "maximize", "grad": id,
                           "prev"?: {"step", "param", "lr"}},  # update (format 5):
                                       # XOR against SGD's prediction instead (below)
              "bits"?: int}                     # a gradient stored rounded (below)

Decoding a value gives its bit pattern, XOR-ed with the base's bits when it has one.
A weight's decoded bits are its values. An update's decoded bits are the weight *after*
the step, so ``update = after - weight`` (computed in the stored dtype: bit-exact for
float32/float64; float16/bfloat16 are stored widened to float32, where the difference is
exact). Since format 5 the update of a ``torch.optim.SGD`` parameter is stored, when that
is smaller, as the XOR against SGD's prediction of the after-weights instead of the weight
(tvis/store/predict.py; about a third of the bytes): ``predicted = w − lr·d`` from the
weight entry, the gradient entry ``grad`` as stored (rounded) and, with momentum, the
buffer the previous step left (``prev``: that step's stored Δw divided by −its ``lr``;
for nesterov less its own force, so its weight and gradient too). The rule is linear in
those arrays: the prediction is their sum scaled by factors of the hyper-parameters,
accumulated in float64 in a fixed order and cast once to the weight's dtype; an element
whose result is non-finite or out of the dtype's normal range, or with a subnormal input,
is predicted as the weight itself. ``predict.sgd_after`` is the definition: a reader
redoes its operations on the same stored values and gets the same bits; a missing or
changed input shows as a checksum mismatch. A weight with a ``base`` needs that earlier step's after-value of the same
parameter (a chain the recorder cuts with a full copy every 8 steps). A gradient stands
alone. ``crc32`` checks the decoded bits: a mismatch means a corrupt or missing link.
Unless the run was recorded with ``--exact``, a gradient is stored rounded to the run's
mantissa bits (``"bits"``, as an activation's gradient is; its statistics are of its exact
values). Weights and Δw are always exact: each step's weight is the previous one's after.

Under a launcher (ranks compared) each step entry also has a ``digest``: BLAKE2b of the
whole weight before the step and of the whole gradient; Δw's is the BLAKE2b of the
(before, after) digests, since Δw is never whole in memory.

The run index (``run.msgpack``)::

    {"batches": [the "batch" map of each batch], "steps": [the "step" map of each step],
     "params": [{"name", "module", "shape", "dtype"}], "notices": [{"level", "text"}],
     "anomalies": [{"kind": "loss_nonfinite" | "nonfinite" | "nonfinite_grad"
                            | "exploding_grad" | "no_grad",
                    "text": one sentence, "batch"?, "step"?, "origin"?: origin,
                    "params"?: [names]}],   # written when the run ends
     "data": {"classes": [...], "normalize": {"mean", "std"}, "vocab": [...],
              "tokenizer": {...}, "insights": {...},   # each key only when known
              "vocab_source"?: str,  # a language model's: "vocabulary: itos dict in train.py
                                     # globals (65 entries)", or
              "vocab_why"?: str,     # why no vocabulary fits the model
              "source_vocab"?: [...], "source_vocab_source"?: str},  # a translation
              # model's source side: the vocabulary its other embedding's ids index
     "project": str, "model": {"params": int, "modules": int}}

A recording of several ranks (``torchrun``, ``srun``, any launcher that sets ``RANK`` and
``WORLD_SIZE`` or ``SLURM_PROCID`` and ``SLURM_NTASKS``) is one group folder holding one
ordinary run folder per rank::

    <group>/                 <stamp>_<script>_<launch key>
      group.json             {"world_size", "launcher", "script", "full_ranks": [0] | "all",
                              "started"}
      rank0/                 a run folder as above, written by rank 0 alone
      rank1/                 ...

Each rank writes only its own ``rank<N>/``, so ranks never wait on one another and a rank
that crashes or is killed marks only its own ``meta.json``. Every rank derives the same
launch key from its environment (torchrun's run id, or its agent's pid; SLURM's job and
step ids); the first to arrive creates the hidden claim file ``<out>/.tvis-group-<key>``
(an exclusive hard link) holding the group folder's name, and the others read it. A rank
that finds its ``rank<N>/`` already there (an earlier launch reused the key) moves on to
the claim ``<key>-1``, then ``<key>-2``, …, so a new launch's ranks meet in a new group. A rank's
``meta.json`` adds ``"rank": {"rank", "local_rank", "world_size", "launcher"}`` and
``"full": bool``. Ranks not recorded in full (by default every rank but 0; ``--ranks``)
keep no tensor values: statistics, losses and parameter norms and digests only.
A rank's ``stop.json`` (``{"batch", "ready"}`` or ``{"ended": true}``) is how ranks agree
to stop after the same training batch (tvis/record/rank_stop.py); readers ignore it.

Digests (``"digest"`` in a tensor entry): the first 16 hex digits of BLAKE2b over the
tensor's raw bytes, so ranks compare exactly without values. Parameter entries of a step
(weight, grad, update) carry one; so does the collated batch (``batch.digest``, also in
the run index), for finding ranks that trained on the same samples.
"""

from __future__ import annotations

# 5: a Δw may be XOR-ed against SGD's prediction (``predict``), which a format-4 reader
# would silently misread as a delta of the weight.
FORMAT_VERSION = 5

META = "meta.json"
RUN_INDEX = "run.msgpack"
SOURCES = "sources.msgpack"
BATCHES = "batches"
STEPS = "steps"
INDEX = "index.msgpack"
BLOB = "blob.bin"

# Files and folders being written carry this suffix (and a leading dot) until they are
# renamed into place; ones left behind by a killed recorder are removed by readers.
TMP_SUFFIX = ".tmp"

# Alignment of arrays inside a blob: lets readers mmap any array with natural alignment.
ALIGN = 64

# Run status values. "running" is what a live recorder writes; a reader that finds the
# recorder gone reports "incomplete" instead (see reader.RunReader.status).
RUNNING, COMPLETE, FAILED, INTERRUPTED, INCOMPLETE = (
    "running",
    "complete",
    "failed",
    "interrupted",
    "incomplete",
)


def folder_name(index: int) -> str:
    """The folder name of batch or step ``index`` (sorts lexically)."""
    return f"{index:06d}"


GROUP = "group.json"
STOP_SYNC = "stop.json"
CLAIM_PREFIX = ".tvis-group-"


def rank_folder(rank: int) -> str:
    """The run folder of ``rank`` inside a group folder."""
    return f"rank{rank}"


def claim_name(key: str) -> str:
    """The claim file that names the group folder of launch ``key``."""
    return f"{CLAIM_PREFIX}{key}"
