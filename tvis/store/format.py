"""The run-directory format: names, version, and the encoding of records.

A run is one folder::

    <run>/
      meta.json              small, human-readable: who/what/when, status, settings
      run.msgpack            the run index: batches, steps, params table, notices, data info
      sources.msgpack        {path: text} snapshot of every project file that ran
      batches/000000/        one folder per batch, written whole then renamed into place
        index.msgpack        {"batch": {...}, "calls": [...], "tensors": [...], "lines": [...], ...}
        blob.bin             raw little-endian arrays, each at a known offset
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

``value.shape`` is the stored (possibly sliced) shape; ``kept`` says how it was cut:
``all`` (whole tensor), ``samples`` (first ``count`` entries along ``batch_dim``) or
``rows`` (first ``count`` entries along dim 0, for tensors without a batch dim).
Statistics always cover the whole tensor; a large tensor's histogram counts a spread-out
subset of about one element in ``sampled``.

A batch index (``batches/N/index.msgpack``)::

    {"batch": {"index", "step", "micro" (position within its step), "loss": float | None,
               "no_grad": bool, "light": bool (values not kept), "batch_size": int | None,
               "phase_ms": {"data", "forward", "loss", "backward", "optimizer"},
               "overhead_ms": float (tvis's own work, already subtracted), "n_calls": int},
     "calls": [call, ...],            # pre-order: a parent comes before its children
     "tensors": [tensor entry, ...],
     "lines": [{"file", "line", "op", "shape", "dtype", "count", "ms", "call"}, ...],
     "data": {"batch": [arg, ...], "indices": [dataset index, ...],
              "items": [{"index", "calls": [first, end)}, ...]},
     "loss": {"call", "fn", "reduction", "ignore_index", "value", "per_element": id,
              "valid": id, "per_sample": [float], "merged": bool, "target": id, "pred": id,
              "p_target": id, "top_i": id, "top_p": id, "classes": int, "shape": [...]},
     "gradcam": [{"call", "layer", "which": "pred" | "true", "tensor": id, "approximate"}],
     "attention": [{"call", "module", "tensor": id, "shape", "heads"}],
     "repr": [{"call", "module", "depth", "tensor": id}],   # pooled, one row per sample
     "tokens": {...}}                 # texts, ids and token strings of tokenizer calls

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

Entries with ``"derived": true`` are arrays tvis computed (per-sample loss, p(target),
Grad-CAM maps, pooled representations); they and the tensors of dataset items past the kept
samples may carry statistics of ``{"numel"}`` only.

Files are project-relative for project files (keys of sources.msgpack), absolute otherwise.

A step index (``steps/N/index.msgpack``)::

    {"step": {"index", "batches": [batch indices], "loss": float | None,
              "optimizers": [{"cls", "groups": [{hyper-parameters}]}]},
     "params": [{"name", "module", "shape", "dtype", "optimizer", "group",
                 "weight": id, "grad": id | None, "update": id,
                 "norms": {"w", "grad", "update", "ratio"}}],
     "tensors": [tensor entry, ...]}   # "weight" is the value before the step;
                                       # "update" is p_after - p_before exactly

The run index (``run.msgpack``)::

    {"batches": [the "batch" map of each batch], "steps": [the "step" map of each step],
     "params": [{"name", "module", "shape", "dtype"}], "notices": [{"level", "text"}],
     "data": {"classes": [...], "normalize": {"mean", "std"}, "vocab": [...],
              "tokenizer": {...}, "insights": {...}},   # each key only when known
     "project": str, "model": {"params": int, "modules": int}}
"""

from __future__ import annotations

FORMAT_VERSION = 1

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
