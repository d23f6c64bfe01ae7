"""The Loss page's view of a CTC loss (speech, handwriting): each sample's target text
beside the model's greedy transcription (the best path: each frame's likeliest class,
repeats collapsed, blanks dropped) in the per-sample table, as a speech script's own
decoder prints them, how many match, and the followed sample's pair in full with its
character error rate. A confusion matrix would say
nothing here: a sample's output is a sequence not aligned with its target."""

from __future__ import annotations

from typing import Any

from rich.text import Text

from tvis.tui import colors, fmt

# Characters of a text in the per-sample table's cells (narrower tables cut them further).
CELL = 48


def ctc_text(rows: list[dict[str, Any]], summary: dict[str, Any] | None) -> Text:
    """How the transcriptions were decoded and how many match their targets (each sample's
    pair is in the per-sample table, the followed one's in full in the note)."""
    rows = [r for r in rows if "target_ids" in r]
    text = Text("target vs greedy transcription ", style="bold")
    text.append("(best path: repeats collapsed, blanks dropped)\n", style=colors.MUTED)
    note = (summary or {}).get("vocabulary")
    if note:
        text.append(f"{note}\n", style=colors.MUTED)
    if not rows:
        return text.append("no targets were recorded for this batch.\n", style=colors.MUTED)
    exact = sum(bool(r.get("exact")) for r in rows)
    rates = [r["cer"] for r in rows if isinstance(r.get("cer"), (int, float))]
    text.append(f"{exact} of {len(rows)} samples transcribed exactly", style=colors.MUTED)
    if rates:
        text.append(f" · mean CER {fmt.num(sum(rates) / len(rates))}", style=colors.MUTED)
    return text.append("\n")


def ctc_cells(row: dict[str, Any]) -> tuple[Text, Text]:
    """A sample's target and transcription as the per-sample table's two cells."""
    if "target_ids" not in row:
        return Text("—"), Text("—")
    pred = Text(_shown(row, "pred", CELL), style=colors.GOOD if row.get("exact") else colors.BAD)
    return Text(_shown(row, "target", CELL)), pred


def ctc_note(rows: list[dict[str, Any]], followed: int) -> Text:
    """The followed sample's target and transcription in full, ids too, and its edits."""
    row = next((r for r in rows if r.get("sample") == followed and "target_ids" in r), None)
    if row is None:
        return Text()
    note = Text(f"\nsample {followed}\n", style="bold")
    for key, label in (("target", "target    "), ("pred", "predicted ")):
        note.append(label, style=colors.MUTED)
        note.append(_shown(row, key, None))
        note.append(f"\n{'ids':<10}", style=colors.MUTED)
        note.append(" ".join(str(i) for i in row[f"{key}_ids"]) or "—", style=colors.MUTED)
        note.append("\n")
    if isinstance(row.get("cer"), (int, float)):
        note.append("character error rate ", style=colors.MUTED)
        note.append(fmt.num(row["cer"]))
        note.append(" (edits per target character)", style=colors.MUTED)
    return note


def _shown(row: dict[str, Any], key: str, width: int | None) -> str:
    """A text as read (quoted: its spaces count), else its ids; "—" when it is empty."""
    value = row.get(f"{key}_text")
    shown = f"“{value}”" if isinstance(value, str) else " ".join(map(str, row[f"{key}_ids"]))
    if not row[f"{key}_ids"]:
        shown = "— (nothing)" if key == "pred" else "—"
    if width is not None and len(shown) > width:
        shown = shown[: width - 1] + "…"
    return shown
