"""The Loss page's view of a multi-label loss (BCE over rows of 0/1 targets): each
sample's labels set beside the set the model predicts (p > 0.5), and the followed
sample's labels one by one. A confusion matrix of argmax classes would say nothing here:
a sample has several labels or none."""

from __future__ import annotations

from typing import Any

from rich.text import Text

from tvis.tui import colors, fmt

# Samples of the batch listed with their sets; the rest are counted.
SHOWN = 32


def labels_text(rows: list[dict[str, Any]], followed: int) -> Text:
    """Every sample's labels set vs predicted set (the followed one marked), then the
    followed sample's labels: set or not, predicted or not, p(label), its loss."""
    rows = [r for r in rows if "labels" in r]
    text = Text("labels set vs predicted (p > 0.5)\n", style="bold")
    if not rows:
        return text.append("no labels were recorded for this batch.", style=colors.MUTED)
    exact = sum(bool(r.get("exact")) for r in rows)
    text.append(
        f"{exact} of {len(rows)} samples predicted exactly · ✓ set and predicted, "
        "− set, missed · + predicted, not set\n",
        style=colors.MUTED,
    )
    for row in rows[:SHOWN]:
        mark = "●" if row["sample"] == followed else " "
        text.append(f"{mark} {row['sample']:>3}  ", style=colors.PHASE["data"])
        text.append_text(_set_line(row))
        text.append("\n")
    if len(rows) > SHOWN:
        text.append(f"… {len(rows) - SHOWN} more samples\n", style=colors.MUTED)
    chosen = next((r for r in rows if r["sample"] == followed), None)
    if chosen is not None and chosen.get("per_label"):
        text.append(f"\nsample {followed}, label by label\n", style="bold")
        text.append(f"{'label':<16} {'set':>4} {'pred':>5} {'p':>7} {'loss':>7}\n", style="bold")
        for entry in chosen["per_label"]:
            name = entry.get("name") or f"label {entry['label']}"
            wrong = entry["target"] != entry["pred"]
            text.append(f"{name[:16]:<16} ")
            text.append(f"{'yes' if entry['target'] else '·':>4} ")
            text.append(f"{'yes' if entry['pred'] else '·':>5} ", style=colors.BAD if wrong else "")
            text.append(f"{fmt.num(entry.get('p')):>7} ")
            text.append(f"{fmt.num(entry.get('loss')):>7}\n", style=colors.PHASE["loss"])
    return text


def _set_line(row: dict[str, Any]) -> Text:
    """One sample's labels, each marked by whether it is set, predicted, or both."""
    names = dict(zip(row["labels"], row.get("label_names") or [], strict=False))
    names.update(zip(row["pred_labels"], row.get("pred_label_names") or [], strict=False))
    labels, predicted = set(row["labels"]), set(row["pred_labels"])
    line = Text()
    if not labels | predicted:
        return line.append("no label set, none predicted", style=colors.MUTED)
    for c in sorted(labels | predicted):
        name = names.get(c) or str(c)
        if c in labels and c in predicted:
            line.append(f"✓{name} ", style=colors.GOOD)
        elif c in labels:
            line.append(f"−{name} ", style=colors.BAD)
        else:
            line.append(f"+{name} ", style=colors.WARN)
    return line
