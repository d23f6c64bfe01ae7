"""Insights → Grad-CAM: where a conv layer's evidence for a class sits in the input picture.

Three modes: one sample (the map over its picture, and the map on its own with a legend),
a grid of samples for one layer, and a strip of every conv layer for one sample; each for
the predicted or the true class, named with its probability. Maps arrive as [0, 1] floats
and pictures as pixels; the picture kit colours and overlays them."""

from __future__ import annotations

from typing import Any

import numpy as np
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Grid, Horizontal, Vertical
from textual.widgets import Static

from tvis.tui import colors, fmt, keys
from tvis.tui.pane import AgentPane
from tvis.tui.picture import HEAT, Picture, Scale, overlay
from tvis.tui.widgets.insight_context import where
from tvis.tui.widgets.loading_cue import LoadingCue

MODES = ("one", "samples", "layers")
MODE_TITLES = {"one": "one sample", "samples": "samples of one layer", "layers": "every layer"}
SIDE = 64
"""Pixels asked for one sample's picture: the examples' inputs are 32×32, shown whole."""

ALPHA = 0.55
"""Weight of the heat over the picture: the picture stays readable under it."""


def thumb_side(width: int) -> int:
    """Pixels per thumbnail side: small in an 80-column terminal, larger when roomy."""
    return 16 if width < 120 else 24


class GradcamView(AgentPane):
    """The Grad-CAM sub-view of the Insights page."""

    DEFAULT_CSS = """
    GradcamView { height: 1fr; }
    GradcamView .title { height: 1; }
    GradcamView #gradcam-one { height: 1fr; }
    GradcamView #gradcam-one Vertical { width: 1fr; }
    GradcamView #gradcam-grid { height: 1fr; grid-gutter: 0 1; }
    GradcamView .thumb { height: auto; }
    GradcamView .caption { height: 1; }
    """

    def __init__(self, layers: list[str] | None = None, **kwargs) -> None:
        super().__init__(**kwargs)
        self.layer_names = list(layers or [])
        # None until the agent's first reply names the layer it starts at (the deepest
        # whose map is big enough to say where).
        self.at_layer: int | None = None
        self.which = "pred"
        self.mode = "one"
        self.reply: dict[str, Any] | None = None
        self._grid_thumbs: list[tuple[Vertical, Picture, Static]] = []  # the grid's, in order
        # A grid of maps can take seconds (and longer to draw as pictures): say so.
        self.cue = LoadingCue(self, self._loading, self._title)

    def compose(self) -> ComposeResult:
        yield Static(classes="title")
        with Horizontal(id="gradcam-one"):
            with Vertical():
                yield Picture(max_rows=32, legend=False, id="gradcam-overlay")
                yield Static(classes="caption", id="gradcam-caption")
            with Vertical():
                yield Picture(max_rows=32, id="gradcam-map")
        yield Grid(id="gradcam-grid")

    # -- asking ----------------------------------------------------------------------------

    def reload(self) -> None:
        asked = self.request(self.mode, self.which)
        if asked is None:
            return
        self.query_one("#gradcam-one").display = self.mode == "one"
        self.query_one("#gradcam-grid").display = self.mode != "one"
        self._title()
        method, params = asked
        if self.mode == "one":
            self.cue.stop()  # the picture's own placeholder says it is loading
            if not self.ask(method, tag="one", **params):
                self.reply = None
                self.query_one("#gradcam-overlay", Picture).placeholder("loading Grad-CAM …")
            return
        self.cue.start()
        self.ask(method, tag="grid", **params)

    def request(self, mode: str, which: str) -> tuple[str, dict[str, Any]] | None:
        """What ``mode`` shows for class ``which`` at the followed sample and this layer, as
        (method, params); None while there is nothing to ask."""
        place = where(self.app)
        if place is None or not self.layer_names:
            return None
        layer = self.layer_names[self.at_layer] if self.at_layer is not None else None
        if mode == "one":
            one = {"sample": self.app.sample, "layer": layer, "width": SIDE, "height": SIDE}
            return "gradcam", {**place, **one, "which": which}
        side = thumb_side(self.size.width or self.app.size.width)
        per_row, rows = self._grid_shape(side)
        limit = max(1, min(per_row * rows, 16384 // (side * side), 64))
        params = {"which": which, "width": side, "height": side, "limit": limit}
        if mode == "samples":
            first = (self.app.sample // limit) * limit  # the page holding the followed sample
            return "gradcam_grid", {**place, "layer": layer, "first": first, **params}
        return "gradcam_grid", {**place, "sample": self.app.sample, **params}

    def ahead(self) -> list[tuple[str, dict[str, Any]]]:
        """What `m` and `t` will show from here (the next mode, the other class), for the
        page to fetch while keys rest: a grid of maps is the agent's work of a round trip
        or more, which the key then does not wait for."""
        other = "true" if self.which == "pred" else "pred"
        following = MODES[(MODES.index(self.mode) + 1) % len(MODES)]
        asked = [self.request(following, self.which), self.request(self.mode, other)]
        return [a for a in asked if a is not None]

    def _grid_shape(self, side: int) -> tuple[int, int]:
        width = self.size.width or self.app.size.width
        height = max(1, (self.size.height or self.app.size.height) - 2)
        return max(1, width // (side + 1)), max(1, height // (side // 2 + 1))

    def answered(self, tag: str, result: Any) -> None:
        if self.at_layer is None and result.get("layer") in self.layer_names:
            self.at_layer = self.layer_names.index(result["layer"])
            self._title()
        if tag == "one":
            if not _same_answer(result, self.reply):  # `m` back to the map drawn: kept
                self.reply = result
                self._draw_one(result)
        elif tag == "grid":
            self._draw_grid(result)

    def failed(self, tag: str, message: str) -> None:
        self.cue.stop()
        if tag == "one":
            self.reply = None
            self.query_one("#gradcam-overlay", Picture).placeholder(message)
            self.query_one("#gradcam-caption", Static).update("")
            self.query_one("#gradcam-map", Picture).clear()
        else:
            self._grid_message(message)

    # -- what the keys do -------------------------------------------------------------------

    def step_layer(self, delta: int) -> None:
        if self.layer_names:
            at = self.at_layer if self.at_layer is not None else len(self.layer_names) - 1
            self.at_layer = (at + delta) % len(self.layer_names)
            self.reload()

    def toggle_which(self) -> None:
        self.which = "true" if self.which == "pred" else "pred"
        self.reload()

    def next_mode(self) -> None:
        self.mode = MODES[(MODES.index(self.mode) + 1) % len(MODES)]
        self.reload()

    # -- drawing ---------------------------------------------------------------------------

    def _title(self) -> None:
        self.query_one(".title", Static).update(self._title_text())

    def _loading(self) -> None:
        title = self._title_text(Text("  · loading Grad-CAM maps …", style=colors.WARN))
        self.query_one(".title", Static).update(title)

    def _title_text(self, note: Text | None = None) -> Text:
        """The mode, layer and class shown; ``note`` after them, before the key hints (which
        give way first on a narrow screen)."""
        title = Text(f"{MODE_TITLES[self.mode]} · ", style="bold")
        at = self.at_layer
        if self.mode != "layers" and at is not None:
            title.append(f"layer {at + 1}/{len(self.layer_names)} {self.layer_names[at]} · ")
        title.append("predicted class" if self.which == "pred" else "true class")
        if note is not None:
            title.append_text(note)
        hints = keys.hint(
            self.app,
            ("insights.which", "pred/true"),
            (("insights.layer_prev", "insights.layer_next"), "layer"),
            ("insights.mode", "mode"),
            (("app.sample_prev", "app.sample_next"), "sample"),
        )
        title.append(f"   {hints}", style="dim")
        return title

    def _draw_one(self, result: dict[str, Any]) -> None:
        image, unit = result.get("image"), np.asarray(result["map"], dtype=np.float32)
        target = self.query_one("#gradcam-overlay", Picture)
        if image is not None:
            target.show_rgb(overlay(image, unit, ALPHA))
        else:
            target.placeholder("the input picture was not kept; the map alone is beside.")
        self.query_one("#gradcam-caption", Static).update(_caption(result, long=True))
        self.query_one("#gradcam-map", Picture).show_values(
            unit, Scale(0.0, 1.0), HEAT, legend=f"× peak {fmt.num(result.get('peak'))}"
        )

    def _draw_grid(self, result: dict[str, Any]) -> None:
        grid = self.query_one("#gradcam-grid", Grid)
        cells = result.get("cells") or []
        if not cells:
            self._grid_message("no Grad-CAM maps to show for this choice.")
            self.cue.stop()
            return
        if self.mode == "samples":
            first, last = cells[0]["sample"], cells[-1]["sample"]
            note = f" · samples {first}–{last} of the {result.get('kept')} with maps"
            self.query_one(".title", Static).update(self._title_text().append(note, "dim"))
        side = thumb_side(self.size.width or self.app.size.width)
        per_row, _ = self._grid_shape(side)
        grid.styles.grid_size_columns = per_row
        grid.styles.grid_columns = f"{side}"
        for (picture, caption), cell in zip(
            self._thumbs(grid, len(cells), side), cells, strict=True
        ):
            caption.update(_caption(cell, long=False, by_layer=self.mode == "layers"))
            if cell.get("image") is not None:
                picture.show_rgb(overlay(cell["image"], cell["map"], ALPHA))
            else:
                picture.show_values(cell["map"], Scale(0.0, 1.0), HEAT)
        self.call_after_refresh(self.cue.stop)  # the cue goes once the pictures are drawn

    def _thumbs(self, grid: Grid, count: int, side: int) -> list[tuple[Picture, Static]]:
        """``count`` thumbnails in ``grid``, each a picture and its caption: those of the
        grid before kept (the next mode's grid or the other class's is as large, and
        mounting ~9 widgets a thumbnail anew was most of `m`'s and `t`'s time), more
        mounted, the ones over removed."""
        thumbs = self._grid_thumbs
        same_size = bool(thumbs) and thumbs[0][1].max_rows == side // 2
        kept = thumbs[:count] if same_size else []
        if not kept:
            grid.remove_children()  # thumbnails of another size, or a message
        elif len(thumbs) > count:
            grid.remove_children([box for box, _, _ in thumbs[count:]])
        new = []
        for _ in range(count - len(kept)):
            picture = Picture(max_rows=side // 2, legend=False, classes="thumb")
            caption = Static(classes="caption")
            new.append((Vertical(picture, caption, classes="thumb"), picture, caption))
        grid.mount(*[box for box, _, _ in new])
        self._grid_thumbs = kept + new
        return [(picture, caption) for _, picture, caption in self._grid_thumbs]

    def _grid_message(self, message: str) -> None:
        grid = self.query_one("#gradcam-grid", Grid)
        grid.remove_children()
        self._grid_thumbs = []
        grid.mount(Static(Text(message)))


def _same_answer(new: dict[str, Any], old: dict[str, Any] | None) -> bool:
    """Whether ``new`` holds what ``old`` did, arrays compared by value: the map asked by
    its layer's name is the one asked before the view knew which layer it starts at."""
    if old is None or new.keys() != old.keys():
        return False
    for key, value in new.items():
        other = old[key]
        if isinstance(value, np.ndarray) or isinstance(other, np.ndarray):
            if not np.array_equal(value, other):
                return False
        elif value != other:
            return False
    return True


def _caption(cell: dict[str, Any], long: bool, by_layer: bool = False) -> Text:
    """The class the map explains, with its probability: "s3 cat .91" or the long form."""
    name = cell.get("class_name") or (
        f"class {cell['class']}" if cell.get("class") is not None else "?"
    )
    p = cell.get("p")
    if not long:
        head = cell.get("layer", "")[-8:] if by_layer else f"s{cell.get('sample')}"
        return Text(f"{head} {name[:8]} {fmt.num(p, 2) if p is not None else ''}".rstrip())
    which = "predicted" if cell.get("which") == "pred" else "true"
    text = Text(f"sample {cell.get('sample')} · {which}: ", style="bold")
    text.append(name, style="bold")
    if p is not None:
        text.append(f" (p = {fmt.num(p)})")
    text.append(f" · {cell.get('layer')} map {fmt.shape(cell.get('map_shape'))}")
    if cell.get("approximate"):
        text.append(" · approximate: the layer mixes samples (BatchNorm)", style="yellow")
    return text
