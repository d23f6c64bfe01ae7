"""The samples of one batch as table rows: input, target, prediction, p(target), loss.

Built from what the recorder wrote for the batch: the collated batch (``data.batch``),
the loss section (``per_sample``; ``target``, ``pred`` and ``p_target`` tensors for
classification), and the run's class names. A field the recording lacks is left out.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tvis.agent.calltree import CallTree
from tvis.store.reader import Chunk


def model_input(record: dict[str, Any], tree: CallTree) -> dict[str, Any] | None:
    """The batch as the model received it: the recorded collated batch's first tensor, or
    else the first tensor the outermost forward module call received."""
    for item in (record.get("data") or {}).get("batch") or []:
        entry = tree.tensor(item.get("tensor")) if isinstance(item, dict) else None
        if entry is not None:
            return entry
    for cid in tree.children[-1]:
        call = tree.by_id[cid]
        if call.get("kind") == "module" and call.get("phase") == "forward":
            for arg in call.get("inputs") or []:
                entry = tree.tensor(arg.get("tensor")) if isinstance(arg, dict) else None
                if entry is not None:
                    return entry
    return None


def _per_sample_values(chunk: Chunk, loss: dict[str, Any], size: int) -> dict[str, list]:
    # Classification only: one target per sample. Token-level decoding ([B*T]) is a
    # different table (the loss page's).
    if loss.get("shape") != [size]:
        return {}
    columns: dict[str, list] = {}
    for key in ("target", "pred", "p_target"):
        if isinstance(loss.get(key), int):
            values = chunk.array(loss[key])
            if values is not None and values.shape[:1] == (size,):
                columns[key] = np.asarray(values).reshape(size, -1)[:, 0].tolist()
    return columns


def sample_rows(chunk: Chunk, tree: CallTree, classes: Any) -> dict[str, Any]:
    """``{batch_size, rows}`` for the ``samples`` method."""
    record = chunk.record
    size = (record.get("batch") or {}).get("batch_size")
    if not isinstance(size, int) or size < 0:
        return {"batch_size": size, "rows": []}
    found = record.get("loss")
    loss: dict[str, Any] = found if isinstance(found, dict) else {}
    listed = loss.get("per_sample")
    per_sample: list[Any] = listed if isinstance(listed, list) else []
    columns = _per_sample_values(chunk, loss, size)
    names = classes if isinstance(classes, list) else []
    given = model_input(record, tree)
    rows = []
    for i in range(size):
        row: dict[str, Any] = {"sample": i}
        if given is not None:
            kind = "image" if len(given.get("shape") or []) == 4 else "tensor"
            row["input"] = {"kind": kind, "tensor": given["id"]}
        if i < len(per_sample):
            row["loss"] = per_sample[i]
        for key, values in columns.items():
            row[key] = values[i]
            if (
                key in ("target", "pred")
                and isinstance(values[i], int)
                and 0 <= values[i] < len(names)
            ):
                row[f"{key}_name"] = names[values[i]]
        rows.append(row)
    return {"batch_size": size, "rows": rows}
