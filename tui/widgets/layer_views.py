"""Every layer's views — On image · Neurons · Stats — for one call of a batch and the
followed sample, used by Replay and by Explore's inspector.

- On image: the layer's activation (or gradient) painted over the input picture; click a
  place (or move with shift+arrows) to list every neuron's raw value there; on an attention
  layer the place picked is the query patch whose gaze is painted (backspace: [CLS]).
- Neurons: every channel / hidden unit as its own small map, most active first, paged;
  vectors such as logits as bars labelled with class names or tokens.
- Stats: the tensor card (stats, histogram, heatmap).

``LayerViews.request`` gives the exact agent request a view makes for a layer, so a player
can prefetch the next frames into the client's cache and find them there.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np
from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.widget import Widget
from textual.widgets import Static
from textual.worker import get_current_worker

from tvis.tui import colors, fmt, keys
from tvis.tui.pane import AgentPane
from tvis.tui.picture import VALUES, Picture, Scale, overlay, to_rgb
from tvis.tui.picture.colormaps import Depth
from tvis.tui.steady import Steady, SteadyStatic, SteadyVertical
from tvis.tui.widgets.insight_context import shown_token
from tvis.tui.widgets.sparkline import signed_hbar
from tvis.tui.widgets.tensor_card import (
    TensorCard,
    TensorRef,
    first_view_request,
    picture_width,
)

if TYPE_CHECKING:
    from textual.dom import DOMNode

    _Node = DOMNode  # what PlaceKeys is mixed into (a page or a pane)
else:
    _Node = object

VIEWS = ("image", "neurons", "stats")
TITLES = {"image": "On image", "neurons": "Neurons", "stats": "Stats"}

PICTURE_PX = 48
"""Side of the input picture the map is painted on: sharp in half blocks, 9 KiB a map."""

MAP_PX = 8
"""Side of each neuron's map: 8 × 8 values read as a shape, and 6 fit across 60 columns."""

OVERLAY_ALPHA = 0.55
"""How strongly the heat covers the picture: the picture still shows through."""


LOCATION_LISTED = 12
"""Neurons listed by name at a picked location (largest |value| first); the count says the rest."""


@dataclass(frozen=True)
class Layer:
    """Which layer the views show: a call of a batch, for a sample, value or gradient."""

    run: str
    batch: int
    call: int
    sample: int
    grad: bool
    tensor: int | None = None  # the output's tensor id (the Stats card needs it)
    name: str = ""


def neurons_limit(width: int, height: int) -> int:
    """Maps that fit a view of ``width`` × ``height`` cells (a map is 8 cells and a gap
    wide, 4 rows and a gap tall in half blocks)."""
    return max(1, (width + 1) // (MAP_PX + 1)) * max(1, (height - 3) // (MAP_PX // 2 + 1))


def token_strength(result: dict[str, Any], depth: Depth) -> Text:
    """The followed sample's tokens, each on the colour of the layer's strength at its
    position (low → high, as the pictures' value map), the way the Loss page colours
    tokens by their loss."""
    tokens = result.get("tokens") or []
    given = result.get("strength")
    strength = np.asarray([] if given is None else given, dtype=np.float32).reshape(1, -1)
    rgb = to_rgb(strength, Scale(0.0, 1.0), VALUES, depth)[0] if strength.size else []
    text = Text()
    for token, (r, g, b) in zip(tokens, np.asarray(rgb).tolist(), strict=False):
        ink = "black" if 0.299 * r + 0.587 * g + 0.114 * b > 140 else "white"
        text.append(shown_token(str(token)), style=Style(color=ink, bgcolor=f"rgb({r},{g},{b})"))
    left = int(result.get("total") or 0) - len(tokens)
    if left > 0:
        text.append(f" … {left} more positions", style=colors.MUTED)
    if result.get("vocab_why"):
        text.append(f"\n{result['vocab_why']}", style=colors.MUTED)
    return text


class OnImageView(Steady, AgentPane):
    """The layer painted over the input picture, and the place the user picked on it: for
    conv maps and patch tokens every neuron's raw value there; for attention the query
    patch, whose gaze is painted instead of [CLS]'s."""

    DEFAULT_CSS = """
    OnImageView { height: auto; }
    OnImageView > .info { height: 2; }
    OnImageView > .location { height: auto; }
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.shown_layer: Layer | None = None
        self.location: tuple[int, int] | None = None
        self.map_shape: tuple[int, int] | None = None
        self.kind: str | None = None  # "conv", "tokens", "attention" of the answer drawn
        self._grid: dict[str, int] | None = None  # the last attention layer's patch grid
        self._pictures: dict[tuple, np.ndarray] = {}
        self._last: dict[str, Any] | None = None
        self.drawn: Layer | None = None  # the layer on screen now (its answer arrived)

    def compose(self) -> ComposeResult:
        yield Picture(max_rows=14, legend=False)
        yield SteadyStatic(classes="info")
        yield SteadyStatic(classes="location")

    @staticmethod
    def request(layer: Layer, picture: bool, query: int = 0) -> tuple[str, dict[str, Any]]:
        return "on_image", {
            "run": layer.run,
            "batch": layer.batch,
            "call": layer.call,
            "sample": layer.sample,
            "grad": layer.grad,
            "query": query,
            "picture": picture,
            "width": PICTURE_PX,
            "height": PICTURE_PX,
        }

    @property
    def query_token(self) -> int:
        """The token whose attention is painted: the picked patch's, else 0 ([CLS])."""
        grid = self._grid
        if self.location is None or not grid:
            return 0
        r, c = min(self.location[0], grid["h"] - 1), min(self.location[1], grid["w"] - 1)
        return grid["offset"] + r * grid["w"] + c

    @staticmethod
    def _picture_key(layer: Layer) -> tuple:
        return (layer.run, layer.batch, layer.sample)

    def held_pictures(self) -> frozenset[tuple]:
        """The input pictures this view holds (it asks the agent for the others)."""
        return frozenset(self._pictures)

    def show(self, layer: Layer) -> None:
        if layer == self.shown_layer:
            return
        if self.shown_layer is None or (self.shown_layer.batch, self.shown_layer.sample) != (
            layer.batch,
            layer.sample,
        ):
            self.location = None
        self.shown_layer = layer
        self._ask_map()
        if self.location is not None and self.kind != "attention":
            self._ask_location()

    def _ask_map(self) -> None:
        assert self.shown_layer is not None
        layer = self.shown_layer
        method, params = self.request(
            layer, self._picture_key(layer) not in self._pictures, self.query_token
        )
        self.ask(method, tag="map", **params)

    def answered(self, tag: str, result: dict[str, Any]) -> None:
        if tag == "location":
            self._show_location(result)
            return
        picture = self.query_one(Picture)
        info = self.query_one(".info", Static)
        picture.display = result.get("kind") != "text"
        if result.get("kind") == "text":  # a text model: the layer on its input tokens
            self.map_shape, self.kind, self._last = None, "text", result
            self.query_one(".location", Static).update(token_strength(result, self._depth()))
            info.update(self._caption(result), layout=False)
            self.drawn = self.shown_layer
            return
        if self.kind == "text":  # its tokens go with it
            self.query_one(".location", Static).update("")
        if not result.get("applies"):
            self.map_shape, self.kind = None, None
            picture.placeholder(result.get("why") or "this layer has no place on the picture.")
            info.update("", layout=False)
            self.drawn = self.shown_layer
            return
        assert self.shown_layer is not None
        key = self._picture_key(self.shown_layer)
        if result.get("image") is not None:
            if len(self._pictures) > 16:
                self._pictures.clear()
            self._pictures[key] = np.asarray(result["image"])
        if self._pictures.get(key) is None:  # asked for by an earlier request still in flight
            method, params = self.request(self.shown_layer, True, self.query_token)
            self.ask(method, tag="map", **params)
            return
        self._last = result
        self.kind = result.get("kind")
        if self.kind == "attention":
            self._grid = result.get("grid")
            self.query_one(".location", Static).update("")
        shape = result.get("map_shape") or (1, 1)
        self.map_shape = (int(shape[0]), int(shape[1]))
        self._paint()
        self.drawn = self.shown_layer
        info.update(self._caption(result), layout=False)

    def _caption(self, result: dict[str, Any]) -> Text:
        assert self.shown_layer is not None
        # Short: the caption has two rows, and the click hint at its end was cut at 120×40.
        # The page's title says forward or backward already.
        what = "|dL/dx|" if self.shown_layer.grad else "|x|"
        if result.get("kind") == "attention":  # the gaze first: it says which patch asks
            what = "gradient of" if self.shown_layer.grad else ""
        how = {
            "conv": "mean over channels",
            "tokens": "per patch token",
            "text": "per input token, mean over its features",
            "attention": self._gaze(result),
        }.get(str(result.get("kind")), "")
        text = Text(
            f"{what} {how}".strip() + f" · peak {fmt.num(result.get('peak'))}", style=colors.MUTED
        )
        if result.get("peak") == result.get("low"):
            text.append(" · the same at every place", style=colors.WARN)
        grid = result.get("map_shape") or []
        text.append(f" · {grid[0]}×{grid[1]} map" if len(grid) == 2 else "", style=colors.MUTED)
        if result.get("kind") in ("conv", "tokens"):
            text.append(" · click a place for its values", style=colors.MUTED)
        elif result.get("kind") == "attention":
            hint = " · backspace: [CLS]" if self.location else " · click a patch: where it looks"
            text.append(hint, style=colors.MUTED)
        return text

    def _depth(self) -> Depth:
        from tvis.tui.picture.widget import depth_of

        return depth_of(self.app.console.color_system)

    def _gaze(self, result: dict[str, Any]) -> str:
        """Whose attention the map shows: [CLS]'s, or the picked patch's (and its token)."""
        query = int(result.get("query") or 0)
        grid = result.get("grid") or {}
        first = int(grid.get("offset") or 0)
        if query < first:
            return "where [CLS] looks" if query == 0 else f"where token {query} looks"
        r, c = divmod(query - first, max(1, int(grid.get("w") or 1)))
        return f"where patch ({r},{c}) looks · token {query}"

    def failed(self, tag: str, message: str) -> None:
        if tag == "location":
            self.query_one(".location", Static).update(Text(message, style=colors.MUTED))
            return
        self.map_shape, self.kind = None, None
        self.query_one(Picture).placeholder(message)
        self.query_one(".info", Static).update("")
        self.drawn = self.shown_layer

    # -- picking a place ------------------------------------------------------------------

    def on_picture_picked(self, event: Picture.Picked) -> None:
        event.stop()
        image = (
            self._pictures.get(self._picture_key(self.shown_layer)) if self.shown_layer else None
        )
        if image is None or self.map_shape is None:
            return
        h, w = image.shape[:2]
        mh, mw = self.map_shape
        self._pick((min(mh - 1, event.row * mh // h), min(mw - 1, event.col * mw // w)))

    def move_location(self, rows: int, cols: int) -> None:
        if self.map_shape is None:
            return
        mh, mw = self.map_shape
        r, c = self.location or (mh // 2, mw // 2)
        self._pick((max(0, min(mh - 1, r + rows)), max(0, min(mw - 1, c + cols))))

    def forget_location(self) -> None:
        """Drop the picked place: its values go, and attention shows [CLS]'s gaze again."""
        if self.location is None:
            return
        self.location = None
        self.query_one(".location", Static).update("")
        if self.kind == "attention" and self.shown_layer is not None:
            self._ask_map()
        elif self._last is not None:
            self._paint()

    def _pick(self, place: tuple[int, int]) -> None:
        self.location = place
        if self.kind == "attention":
            self._ask_map()  # the map itself changes: where this patch looks
        else:
            self._ask_location()

    def _ask_location(self) -> None:
        if self.shown_layer is None or self.location is None:
            return
        method, params = self.request(self.shown_layer, False, self.query_token)
        self.ask(method, tag="location", **{**params, "at": list(self.location)})

    def _show_location(self, result: dict[str, Any]) -> None:
        found = result.get("location") or {}
        values = np.asarray(found.get("values") if found.get("values") is not None else [])
        text = Text(f"at ({found.get('row')}, {found.get('col')}): ", style="bold")
        order = np.argsort(-np.abs(np.nan_to_num(values, nan=np.inf)))[:LOCATION_LISTED]
        text.append("  ".join(f"#{i} {fmt.num(float(values[i]), 2)}" for i in order))
        total = found.get("total", values.size)
        text.append(f"  ({total} neurons, largest |value| first)", style=colors.MUTED)
        self.query_one(".location", Static).update(text)
        self._paint()

    def _paint(self) -> None:
        """The map over the picture, the picked place (or query patch) framed."""
        image = (
            self._pictures.get(self._picture_key(self.shown_layer)) if self.shown_layer else None
        )
        if image is None or not self.map_shape or self._last is None:
            return
        painted = overlay(image, np.asarray(self._last["map"]), OVERLAY_ALPHA)
        picture = self.query_one(Picture)
        picture.cursor, picture.grid = None, self.map_shape
        if self.location is not None:  # framed by the picture, after it is scaled to fit
            mh, mw = self.map_shape
            picture.cursor = (min(self.location[0], mh - 1), min(self.location[1], mw - 1))
        picture.show_rgb(painted)


class PlaceKeys(_Node):
    """The On image view's keys (``keys.LAYER_VIEWS``) for any widget or page holding
    layer views: each moves the place on the On image view that is showing."""

    def _image_views(self) -> list[OnImageView]:
        # Shown: the On image view is the current one and its layer views are not hidden
        # (Replay hides them on events without a layer).
        views = self.query(OnImageView)
        return [v for v in views if v.display and v.parent is not None and v.parent.display]

    def action_place(self, rows: int, cols: int) -> None:
        for view in self._image_views():
            view.move_location(rows, cols)

    def action_forget_place(self) -> None:
        for view in self._image_views():
            view.forget_location()


BAR_ORDER = {"value": "values, highest first", "magnitude": "values, largest |value| first"}
"""What the Neurons bars' title says of their order (the agent's ``order``)."""


class NeuronsView(Steady, AgentPane):
    """Every channel or unit, most active first, one page at a time."""

    DEFAULT_CSS = """
    NeuronsView { height: auto; }
    NeuronsView > Static { height: auto; }
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.shown_layer: Layer | None = None
        self.page_offset = 0
        self.total = 0
        self.limit = 12
        self.last_reply: dict[str, Any] | None = None  # what is drawn

    def compose(self) -> ComposeResult:
        yield Picture(max_rows=20, legend=False)
        yield SteadyStatic(classes="bars")
        yield SteadyStatic(classes="info")

    @staticmethod
    def request(layer: Layer, offset: int, limit: int) -> tuple[str, dict[str, Any]]:
        return "neurons", {
            "run": layer.run,
            "batch": layer.batch,
            "call": layer.call,
            "sample": layer.sample,
            "grad": layer.grad,
            "offset": offset,
            "limit": limit,
            "width": MAP_PX,
            "height": MAP_PX,
        }

    def show(self, layer: Layer, limit: int) -> None:
        if self.shown_layer is None or (layer.batch, layer.call) != (
            self.shown_layer.batch,
            self.shown_layer.call,
        ):
            self.page_offset = 0
        if layer == self.shown_layer and limit == self.limit:
            return
        self.shown_layer, self.limit = layer, limit
        self._ask()

    def page(self, delta: int) -> None:
        if self.shown_layer is None or not self.total:
            return
        offset = max(0, min(self.page_offset + delta * self.limit, max(0, self.total - 1)))
        if offset != self.page_offset:
            self.page_offset = offset
            self._ask()

    def _ask(self) -> None:
        assert self.shown_layer is not None
        method, params = self.request(self.shown_layer, self.page_offset, self.limit)
        self.ask(method, tag="main", **params)

    def answered(self, tag: str, result: dict[str, Any]) -> None:
        self.total = int(result.get("total") or 0)
        self.last_reply = result
        picture, bars = self.query_one(Picture), self.query_one(".bars", Static)
        units = result.get("units") or []
        signed = bool(self.shown_layer and self.shown_layer.grad)
        kind = result.get("kind")
        if kind == "bars":
            picture.clear()
            bars.update(self._bars(result, signed))
        elif kind == "strips":
            bars.update("")
            strips = np.stack([np.asarray(m).reshape(-1) for m in result.get("maps") or []])
            picture.show_values(strips, Scale.of(strips, signed), y_labels=[f"#{u}" for u in units])
        else:
            bars.update("")
            maps = [np.asarray(m, dtype=np.float32) for m in result.get("maps") or []]
            every = np.concatenate([m.reshape(-1) for m in maps]) if maps else np.zeros(1)
            picture.show_mosaic(maps, Scale.of(every, signed))
        first, last = self.page_offset + 1, self.page_offset + len(units)
        text = Text(f"{first}–{last} of {self.total} ", style="bold")
        text.append(
            {
                "maps": "channels, most active first",
                "strips": "units over the tokens, most active first",
            }.get(str(kind), BAR_ORDER.get(str(result.get("order")), "values")),
            style=colors.MUTED,
        )
        if result.get("position") is not None:
            text.append(f" · position {result['position']}", style=colors.MUTED)
        if kind != "bars":
            text.append("\n" + " ".join(f"#{u}" for u in units), style=colors.MUTED)
        if self.total > len(units):
            text.append("  pgup/pgdn: more", style=colors.MUTED)
        self.query_one(".info", Static).update(text)

    def _bars(self, result: dict[str, Any], signed: bool) -> Text:
        """One bar per value on a zero axis: negatives to its left in the negative colour,
        positives to its right, all on one scale (the largest |value| fills its side)."""
        values = [float(v) for v in result.get("values") or []]
        labels = result.get("labels") or [f"#{u}" for u in result.get("units") or []]
        finite = [v for v in values if np.isfinite(v)]
        top = max((abs(v) for v in finite), default=1.0) or 1.0
        width = max(8, (self.size.width or 40) - 23)
        lo, hi = (result.get("lo"), result.get("hi")) if finite else (0.0, 0.0)
        negatives = any(v < 0 for v in finite) or (isinstance(lo, float) and lo < 0)
        positives = any(v > 0 for v in finite) or (isinstance(hi, float) and hi > 0)
        left = width // 2 if negatives and positives else (width if negatives else 0)
        right = width - left
        styles = {
            "neg": Style(color=colors.NEGATIVE),
            "neg-edge": Style(color=colors.NEGATIVE, reverse=True),
            "pos": Style(color=colors.POSITIVE),
            "axis": Style(color=colors.MUTED),
            "": Style(),
        }
        text = Text()
        for label, value in zip(labels, values, strict=False):
            text.append(f"{fmt.clip(str(label), 10):>10} ", style="bold")
            for piece, kind in signed_hbar(value, top, left, right):
                text.append(piece, style=styles[kind])
            text.append(f" {fmt.num(value, 3)}\n", style=colors.MUTED)
        return text

    def failed(self, tag: str, message: str) -> None:
        self.query_one(Picture).placeholder(message)
        self.query_one(".bars", Static).update("")
        self.query_one(".info", Static).update("")


STATS_ROWS = 8
"""Rows of the Stats view's heatmap (the card's ``max_rows``)."""


def stats_request(layer: Layer) -> tuple[str, dict[str, Any]] | None:
    """What the Stats view asks first for ``layer``: its output's entry (None: no tensor)."""
    if layer.tensor is None:
        return None
    return "tensor", {"run": layer.run, "batch": layer.batch, "tensor": layer.tensor}


def stats_ref(layer: Layer, entry: dict[str, Any]) -> TensorRef:
    """The card's tensor for ``layer`` once its entry came."""
    return TensorRef(title=layer.name or "output", entry=entry, run=layer.run, batch=layer.batch)


def stats_card_request(
    layer: Layer, entry: dict[str, Any], width: int
) -> tuple[str, dict[str, Any]] | None:
    """The heatmap the Stats card of ``layer`` asks for in a view ``width`` columns wide
    (None: the card draws none), as ``Card._load_view`` asks it."""
    ref = stats_ref(layer, entry)
    return first_view_request(ref, layer.grad, layer.sample, picture_width(width), STATS_ROWS)


class StatsView(Steady, AgentPane):
    """The layer's output as the inspector's tensor card."""

    DEFAULT_CSS = "StatsView { height: auto; }"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.shown_layer: Layer | None = None
        self.card: TensorCard | None = None

    def compose(self) -> ComposeResult:
        yield SteadyStatic(classes="info")

    def show(self, layer: Layer) -> None:
        if layer == self.shown_layer:
            return
        self.shown_layer = layer
        asked = stats_request(layer)
        if asked is None:
            self.query_one(".info", Static).update(
                Text("this call returned no tensor", style=colors.MUTED)
            )
            return
        method, params = asked
        self.ask(method, **params)

    def answered(self, tag: str, entry: dict[str, Any]) -> None:
        assert self.shown_layer is not None
        ref = stats_ref(self.shown_layer, entry)
        self.query_one(".info", Static).update("")
        if self.card is None or not self.card.is_mounted:
            self.card = TensorCard(
                ref, self.shown_layer.grad, self.shown_layer.sample, max_rows=STATS_ROWS
            )
            self.mount(self.card)
        else:
            self.card.show(ref, self.shown_layer.grad, self.shown_layer.sample)

    def failed(self, tag: str, message: str) -> None:
        self.query_one(".info", Static).update(Text(message, style=colors.MUTED))


class _Switcher(SteadyStatic):
    """The ``On image  Neurons  Stats`` line; a click on a name shows that view."""

    def action_switch_view(self, view: str) -> None:
        if isinstance(self.parent, LayerViews):
            self.parent.switch(view)


class LayerViews(SteadyVertical):
    """The three views of one layer with a switcher line; ``v`` (or a click) cycles them."""

    DEFAULT_CSS = """
    LayerViews { height: auto; }
    LayerViews > .switcher { height: 1; }
    """

    def __init__(self, layer: Layer | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.current = VIEWS[0]
        self.shown_layer: Layer | None = layer
        self.ready = False  # its views are composed (a page may mount it late)

    def compose(self) -> ComposeResult:
        yield _Switcher(classes="switcher")
        yield OnImageView()
        yield NeuronsView()
        yield StatsView()

    def on_mount(self) -> None:
        self.ready = True
        self.switch(self.current)

    def switch(self, view: str) -> None:
        """Show ``view`` (image, neurons or stats)."""
        self.current = view
        if not self.ready:
            return  # chosen before its views exist: shown as they mount
        panes = {"image": OnImageView, "neurons": NeuronsView, "stats": StatsView}
        for name, kind in panes.items():
            self.query_one(kind).display = name == view
        text = Text()
        for name in VIEWS:
            style = Style(
                reverse=name == view, bold=name == view, meta={"@click": f"switch_view('{name}')"}
            )
            text.append(f" {TITLES[name]} ", style=style)
        text.append(f"  {keys.shown(self.app, self._switch_id())} switches", style=colors.MUTED)
        self.query_one(".switcher", Static).update(text)
        if self.shown_layer is not None:
            self._show(self.shown_layer)

    def _switch_id(self) -> str:
        """The binding that cycles these views where they are (Replay's or the inspector's)."""
        for node in self.ancestors:
            for binding in getattr(node, "BINDINGS", ()):
                if getattr(binding, "action", None) == "cycle_view" and binding.id:
                    return binding.id
        return "replay.view"

    def cycle(self) -> None:
        self.switch(VIEWS[(VIEWS.index(self.current) + 1) % len(VIEWS)])

    def show(self, layer: Layer) -> None:
        self.shown_layer = layer
        self._show(layer)

    def _limit(self) -> int:
        # The views grow with their content; the room they have is their container's.
        room = self.parent.size if isinstance(self.parent, Widget) else self.size
        return neurons_limit(room.width or 60, max(10, (room.height or 20) - 2))

    def _show(self, layer: Layer) -> None:
        if self.current == "image":
            self.query_one(OnImageView).show(layer)
        elif self.current == "neurons":
            self.query_one(NeuronsView).show(layer, self._limit())
        else:
            self.query_one(StatsView).show(layer)

    def request(self, layer: Layer) -> tuple[str, dict[str, Any]] | None:
        """The request the current view makes for ``layer`` (for prefetching)."""
        return view_request(self.current, layer, self._limit(), self._held())

    def requester(self) -> Callable[[Layer], tuple[str, dict[str, Any]] | None]:
        """``request`` with what it reads from the screen taken now: for a worker thread."""
        return partial(view_request, self.current, limit=self._limit(), held=self._held())

    def _held(self) -> frozenset[tuple]:
        return self.query_one(OnImageView).held_pictures() if self.ready else frozenset()

    def others_fetcher(self, layer: Layer) -> Callable[[Any], None]:
        """A worker's job (given the client) that fetches what ``v`` shows next for
        ``layer``: the views other than the current one, in the order ``v`` reaches them,
        as each will ask (what they read from the screen is taken now)."""
        at = VIEWS.index(self.current)
        others = [VIEWS[(at + n) % len(VIEWS)] for n in range(1, len(VIEWS))]
        return partial(
            fetch_views,
            views=others,
            layer=layer,
            limit=self._limit(),
            held=self._held(),
            width=self.size.width,
        )


def opening_request(layer: Layer) -> tuple[str, dict[str, Any]] | None:
    """The request new layer views make for ``layer``: their first view's, holding no
    picture yet (the On image view, which has no limit)."""
    return view_request(VIEWS[0], layer, limit=0)


def view_request(
    view: str, layer: Layer, limit: int, held: frozenset[tuple] = frozenset()
) -> tuple[str, dict[str, Any]] | None:
    """The request ``view`` makes for ``layer``: the On image view asks for the input
    picture too unless it holds it (``held``: its picture keys; a layer of another batch
    comes with that batch's picture)."""
    if view == "image":
        return OnImageView.request(layer, OnImageView._picture_key(layer) not in held)
    if view == "neurons":
        return NeuronsView.request(layer, 0, limit)
    return None


def fetch_views(
    data: Any, views: list[str], layer: Layer, limit: int, held: frozenset[tuple], width: int
) -> None:
    """Warm ``data``'s cache, in the background, with ``views`` of ``layer`` (run in a
    worker; stops when a newer one replaces it): the Stats view's entry, then its card's
    heatmap at ``width`` columns; the others' one request each."""
    worker = get_current_worker()
    for view in views:
        if worker.is_cancelled:
            return
        if view != "stats":
            asked = view_request(view, layer, limit, held)
            if asked is not None:
                data.prefetch_later(asked[0], **asked[1])
            continue
        first = stats_request(layer)
        entry = data.prefetch_later(first[0], **first[1]) if first is not None else None
        if isinstance(entry, dict) and not worker.is_cancelled:
            card = stats_card_request(layer, entry, width)
            if card is not None:
                data.prefetch_later(card[0], **card[1])
