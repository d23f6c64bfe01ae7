"""A segmentation loss's followed sample as pictures: its target and predicted masks side by
side in class colours (ignored pixels grey), its per-pixel loss as a heatmap with its colour
bar, its pixel accuracy, and each class's IoU over the batch or the run.

Drawn from the agent's ``sample_table`` (kind "pixels") and ``loss_detail`` (``iou``)
replies, which the Loss page asks for."""

from __future__ import annotations

from typing import Any

import numpy as np
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Static

from tvis.tui import colors, fmt
from tvis.tui.picture import HEAT, Picture, Scale
from tvis.tui.picture.widget import depth_of, label_legend

MASK_ROWS = 10
"""Cells a mask or the loss map is tall: two masks side by side and the loss below fit
the Loss page's right pane at 120×40."""

SHORT_ROWS = 4
"""Cells they are tall in a terminal under ``TALL`` rows (80×24: the masks stay in view
below the per-sample table; the loss map and IoU are a scroll away)."""

TALL = 36

IOU_BAR = 10
"""Cells of an IoU bar (IoU 1 fills them)."""

IOU_ROWS = 16
"""Classes listed in the IoU table; the rest are counted."""


def shape_note(view: dict[str, Any]) -> str:
    """``32×32`` or ``512×512, shown as 64×64`` (and which slice of a volume)."""
    h, w = view.get("shape") or (0, 0)
    text = f"{h}×{w}"
    shown = view.get("shown") or [h, w]
    if view.get("stride", 1) > 1:
        step = view["stride"]
        text += (
            f", shown as {shown[0]}×{shown[1]} (masks: one pixel of each {step}×{step} block,"
            " loss: its mean)"
        )
    if view.get("slice"):
        text += f" · {view['slice']}"
    return text


def iou_text(table: dict[str, Any] | None, scope: str) -> Text:
    """Each class's IoU as a bar and a number, with its name and target pixels."""
    text = Text("IoU per class", style="bold")
    text.append(f"\n{scope} · b: batch / run", style=colors.MUTED)
    if not table or not table.get("classes"):
        text.append("\nno valid pixel to count", style=colors.MUTED)
        return text
    text.append(
        f"\npixel accuracy {fmt.pct(table.get('accuracy'))} · mean IoU "
        f"{fmt.num(table.get('mean_iou'), 3)}",
        style=colors.MUTED,
    )
    rows = list(zip(table["classes"], table["names"], table["iou"], table["pixels"], strict=False))
    labels = [fmt.clip(str(name if name else c), 12) for c, name, _, _ in rows[:IOU_ROWS]]
    width = max(map(len, labels), default=1)
    for label, (_, _, iou, pixels) in zip(labels, rows, strict=False):
        filled = int(round(max(0.0, min(1.0, iou)) * IOU_BAR))
        text.append(f"\n{label:>{width}} ")
        text.append("█" * filled, style=colors.GOOD)
        text.append("·" * (IOU_BAR - filled), style=colors.MUTED)
        text.append(f" {iou:.3f}")
        text.append(f" {pixels}px", style=colors.MUTED)
    if len(rows) > IOU_ROWS:
        text.append(f"\n… {len(rows) - IOU_ROWS} more classes", style=colors.MUTED)
    text.append(f"\n{table.get('total')} valid pixels", style=colors.MUTED)
    return text


class PixelLossView(Vertical):
    """The followed sample of a per-pixel loss: masks, loss map, accuracy and IoU."""

    DEFAULT_CSS = """
    PixelLossView { height: auto; }
    PixelLossView Static { height: auto; }
    PixelLossView Horizontal { height: auto; }
    PixelLossView Horizontal > * { width: 1fr; height: auto; padding-right: 1; }
    """

    def compose(self) -> ComposeResult:
        yield Static(id="pixel-head")
        with Horizontal(id="pixel-masks"):
            with Vertical():
                yield Static(Text("target", style="bold"))
                yield Picture(max_rows=MASK_ROWS, legend=False, id="pixel-target")
            with Vertical():
                yield Static(Text("predicted (argmax)", style="bold"))
                yield Picture(max_rows=MASK_ROWS, legend=False, id="pixel-pred")
        yield Static(id="pixel-classes")
        with Horizontal(id="pixel-lower"):
            with Vertical():
                yield Static(Text("per-pixel loss", style="bold"))
                yield Picture(max_rows=MASK_ROWS, id="pixel-loss")
            yield Static(id="pixel-iou")

    def show(self, view: dict[str, Any], detail: dict[str, Any], whole_run: bool) -> None:
        """Draw the sample ``view`` (``sample_table``'s kind "pixels") with the batch's
        ``detail`` (its loss range and IoU)."""
        depth = depth_of(self.app.console.color_system)
        rows = MASK_ROWS if self.app.size.height >= TALL else SHORT_ROWS
        for picture in self.query(Picture):
            picture.max_rows = rows
        head = Text(f"sample {view.get('sample')} · ", style="bold")
        head.append(f"pixel accuracy {fmt.pct(view.get('accuracy'))}")
        head.append(
            f" · loss {fmt.num(view.get('loss_mean'))} · {shape_note(view)}", style=colors.MUTED
        )
        self.query_one("#pixel-head", Static).update(head)
        ignored = np.asarray(view["ignored"]).astype(bool)
        self.query_one("#pixel-target", Picture).show_labels(view["target"], ignored)
        pred = self.query_one("#pixel-pred", Picture)
        if view.get("pred") is not None:
            pred.show_labels(view["pred"])
        else:
            pred.placeholder("not recorded")
        ignore = view.get("ignore_index")
        legend = label_legend(view.get("present") or [], view.get("names") or [], depth, False)
        if ignored.any():
            legend.append("  ")
            legend.append_text(label_legend([], [], depth, True))
            counted = f"{view.get('valid_pixels')} of {view.get('pixels')} pixels counted"
            legend.append(f" (ignore_index={ignore}) · {counted}", style="dim")
        self.query_one("#pixel-classes", Static).update(legend)
        loss = self.query_one("#pixel-loss", Picture)
        if view.get("loss") is not None:
            hist = detail.get("hist") or {}
            lo, hi = hist.get("lo"), hist.get("hi")
            values = np.asarray(view["loss"])
            scale = Scale(lo, hi) if lo is not None and hi is not None else Scale.of(values)
            masked = np.asarray(view.get("loss_ignored"), dtype=bool)
            loss.show_values(values, scale, HEAT, legend="scale: the batch's range", masked=masked)
        else:
            loss.placeholder("per-pixel losses not recorded")
        self.show_iou(detail, whole_run)

    def show_iou(self, detail: dict[str, Any], whole_run: bool) -> None:
        iou = detail.get("iou") or {}
        if whole_run and iou.get("run"):
            count = len(iou["run"].get("batches") or [])
            table, scope = iou["run"], f"{count} training batch{'es' if count != 1 else ''}"
        else:
            table, scope = iou.get("batch"), "this batch"
        self.query_one("#pixel-iou", Static).update(iou_text(table, scope))
