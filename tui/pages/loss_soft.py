"""Soft targets on the Loss page: a target that is a mix of classes (mixup, cutmix) shown
per sample as its classes, their weights and the λ that mixed them, not as one label."""

from __future__ import annotations

from typing import Any

from rich.text import Text

from tvis.tui import colors, fmt

SOFT = {
    "mix": (
        "soft targets: each sample's target is a mix of classes (mixup or cutmix: λ of one "
        "label and 1 − λ of another), not one class, so there is no confusion matrix"
    ),
    "distribution": (
        "soft targets: each sample's target is a distribution over the classes (a label "
        "distribution), not one class, so there is no confusion matrix; its heaviest classes:"
    ),
}
"""What the targets are, by ``loss_detail``'s ``soft_target``."""


def mix_lambda(mix: list[dict[str, Any]], rest: float) -> float | None:
    """λ of a two-class mix: the first class's share of the weight the two hold above
    what every class has (label smoothing's share); None unless two classes are mixed."""
    if len(mix) != 2:
        return None
    first, second = (m["weight"] - rest for m in mix)
    return first / (first + second) if first + second > 0 else None


def soft_targets_text(rows: list[dict[str, Any]], followed: int, kind: str = "mix") -> Text:
    """What the targets are (``SOFT[kind]``), then a line per sample: its target classes
    with their weights, λ (of a mix), and what the model predicts; ● on the ``followed``
    sample."""
    soft = [(row, row["soft_target"]) for row in rows if row.get("soft_target")]
    mixes = [
        " + ".join(f"{fmt.num(m['weight'], 2)} × {_name(m)}" for m in t.get("mix") or [])
        for _, t in soft
    ]
    width = max([len("target classes × weight"), *map(len, mixes)])
    text = Text(SOFT.get(kind, SOFT["distribution"]) + "\n", style=colors.MUTED)
    lam_head = "λ     " if kind == "mix" else ""
    text.append(
        f"  sample  {'target classes × weight':<{width}}  {lam_head}predicted\n", style="bold"
    )
    for (row, target), mix in zip(soft, mixes, strict=True):
        lam = mix_lambda(target.get("mix") or [], float(target.get("rest") or 0.0))
        text.append("●" if row.get("sample") == followed else " ", style=colors.PHASE["data"])
        text.append(f" {row.get('sample', '?'):>6}  {mix:<{width}}  ")
        if kind == "mix":
            text.append(f"{fmt.num(lam, 2) if lam is not None else '—':<4}  ")
        pred = row.get("pred")
        text.append(
            _name({"class": pred, "name": row.get("pred_name")}) if pred is not None else "—"
        )
        text.append("\n")
    rest = max((float(t.get("rest") or 0.0) for _, t in soft), default=0.0)
    if rest > 0:
        text.append(
            f"every other class: {fmt.num(rest, 2)} (label smoothing's share)", style=colors.MUTED
        )
    return text


def _name(entry: dict[str, Any]) -> str:
    name = entry.get("name")
    return f"{entry['class']} {name}" if name else f"class {entry['class']}"
