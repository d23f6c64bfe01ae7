"""A CTC loss's samples as text: each one's target and the model's greedy transcription
(the recorder's ``ctc`` ids, blanks already dropped), decoded with the run's character
map, and how far apart they are (edits per target character, as speech scripts report)."""

from __future__ import annotations

from typing import Any

from tvis.agent.decode import Vocabulary


def ctc_columns(loss: dict[str, Any], vocab: Vocabulary, rows: list[dict[str, Any]]) -> None:
    """Each row of ``rows`` (by its ``sample``) gains ``target_ids``, ``pred_ids``, their
    texts when the run has a character map, ``exact`` and ``cer``."""
    found = loss.get("ctc")
    if not isinstance(found, dict):
        return
    targets, preds = found.get("targets") or [], found.get("preds") or []
    for row in rows:
        i = row.get("sample")
        if not isinstance(i, int) or not (i < len(targets) and i < len(preds)):
            continue
        target, pred = targets[i], preds[i]
        row["target_ids"], row["pred_ids"] = target, pred
        if vocab.known:
            row["target_text"], row["pred_text"] = vocab.text(target), vocab.text(pred)
        row["exact"] = target == pred
        row["cer"] = edit_distance(target, pred) / len(target) if target else None


def ctc_summary(loss: dict[str, Any], vocab: Vocabulary) -> dict[str, Any] | None:
    """``{blank, classes, vocabulary}``: what the rows' texts were decoded with (or why
    they are ids)."""
    found = loss.get("ctc")
    if not isinstance(found, dict):
        return None
    blank = found.get("blank")
    return {"blank": blank, "classes": found.get("classes"), "vocabulary": vocab.note}


def edit_distance(a: list[int], b: list[int]) -> int:
    """Levenshtein distance: insertions, deletions and substitutions turning ``a`` into ``b``."""
    previous = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        current = [i]
        for j, y in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (x != y)))
        previous = current
    return previous[-1]
