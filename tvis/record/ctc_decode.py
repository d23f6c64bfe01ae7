"""A CTC loss call's targets and the model's greedy transcription, sample by sample, as id
lists the viewer turns into text: what a speech script's own ``GreedyDecoder`` prints.

Targets come either concatenated (1-D, split by ``target_lengths``) or padded ``(B, S)``
(each row cut at its length). The prediction is the best path: the argmax class of each
frame of the ``(T, B, C)`` (or unbatched ``(T, C)``) log-probabilities within the
sample's ``input_lengths``, repeats collapsed, then blanks dropped. Only reads tensors the
script made, under ``no_grad``: training is untouched.
"""

from __future__ import annotations

import torch

# Ids kept over a batch's targets and predictions together: a few pages of text a sample
# for any batch a speech model trains on; beyond it, the rows are left out.
MAX_IDS = 1 << 18


def decoded(params: dict) -> dict | None:
    """``{"blank", "targets", "preds"}``: each sample's target ids and greedy-decoded ids;
    None when the call's arguments are not a CTC loss's (or the batch is too long)."""
    log_probs = params.get("log_probs")
    targets = params.get("targets")
    blank = params.get("blank", 0)
    if not isinstance(log_probs, torch.Tensor) or not isinstance(targets, torch.Tensor):
        return None
    if log_probs.dim() == 2:  # unbatched (T, C): one sample
        log_probs, targets = log_probs.unsqueeze(1), targets.reshape(1, -1)
    if log_probs.dim() != 3 or not isinstance(blank, int):
        return None
    frames, batch = log_probs.shape[0], log_probs.shape[1]
    input_lengths = _lengths(params.get("input_lengths"), batch)
    target_lengths = _lengths(params.get("target_lengths"), batch)
    if input_lengths is None or target_lengths is None:
        return None
    if sum(target_lengths) + min(sum(input_lengths), frames * batch) > MAX_IDS:
        return None
    with torch.no_grad():
        path = log_probs.detach().argmax(-1).T.cpu()  # (B, T)
        flat = targets.detach().reshape(-1).cpu() if targets.dim() == 1 else None
        rows = None if targets.dim() == 1 else targets.detach().cpu()
    target_ids: list[list[int]] = []
    start = 0
    for i, n in enumerate(target_lengths):
        if flat is not None:
            target_ids.append(flat[start : start + n].tolist())
            start += n
        else:
            assert rows is not None
            target_ids.append(rows[i, :n].tolist())
    preds = [
        collapse(path[i, : min(n, frames)].tolist(), blank) for i, n in enumerate(input_lengths)
    ]
    return {"blank": blank, "targets": target_ids, "preds": preds}


def collapse(path: list[int], blank: int) -> list[int]:
    """A best path's labels: each run of one class kept once, then blanks dropped."""
    out = []
    previous = None
    for c in path:
        if c != previous and c != blank:
            out.append(c)
        previous = c
    return out


def _lengths(value, batch: int) -> list[int] | None:
    """Per-sample lengths as given (a tensor, list or tuple of ints); None when they are
    not one non-negative length per sample."""
    if isinstance(value, torch.Tensor):
        value = value.detach().reshape(-1).tolist()
    elif isinstance(value, int) and batch == 1:  # an unbatched call's one length
        value = [value]
    if not isinstance(value, (list, tuple)) or len(value) != batch:
        return None
    if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in value):
        return None
    return list(value)
