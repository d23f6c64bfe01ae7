"""Insights → Attention: a token × token map of one layer and head (or the mean of the
heads, or the rollout through every layer) for the followed sample, with the tokens on
both axes, a cursor that reads the exact weight and both tokens, every head of the layer
as small maps ordered by entropy, and for vision models where the cursor's query token
looks, laid over the input picture."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Static

from tvis.agent.replies import AttentionReply
from tvis.tui import colors, fmt, keys
from tvis.tui.pane import AgentPane, prefetch_all
from tvis.tui.picture import Picture, Scale, overlay
from tvis.tui.widgets.insight_context import shown_token, where
from tvis.tui.widgets.loading_cue import LoadingCue

if TYPE_CHECKING:
    from textual.timer import Timer

MAP_SIDE = 128
"""Side asked for: the agent's cap, so maps of up to 128 tokens arrive exact (no block
means) and the cursor reads recorded weights; the picture shrinks them to the screen."""

HEAD_SIDE = 16
"""Side of each head's small map in the heads grid (8 rows of half blocks + a caption)."""

NEIGHBOURS_AFTER_S = 0.3
"""Rest of the cursor before the overlays of the rows beside it are asked for: keys
repeating faster ask for nothing ahead."""

CHROME_ROWS = 5
"""Rows around the map: title, key labels, legend, cursor line, key hints."""


class AttentionView(AgentPane):
    """The Attention sub-view of the Insights page."""

    DEFAULT_CSS = """
    AttentionView { height: 1fr; }
    AttentionView .title { height: 1; }
    AttentionView .cursor { height: auto; }
    AttentionView .hints { height: 1; }
    AttentionView #attention-body { height: 1fr; }
    AttentionView #attention-map { width: 1fr; }
    AttentionView #attention-side { width: 34; display: none; }
    AttentionView #attention-side.shown { display: block; }
    AttentionView #attention-heads { height: 9; display: none; }
    AttentionView #attention-heads.shown { display: block; }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.at_layer = 0
        self.head: int | None = None
        self.rollout = False
        self.show_heads = False
        self.cursor = (0, 0)
        self.reply: AttentionReply | None = None  # the ``attention`` map on screen
        self.cursor_value: float | None = None
        self.overlay_cue = LoadingCue(self, self._overlay_loading, lambda: None)
        self._neighbours_timer: Timer | None = None

    def compose(self) -> ComposeResult:
        yield Static(classes="title")
        with Horizontal(id="attention-body"):
            with Vertical(id="attention-map"):
                yield Picture(max_rows=40, id="attention-picture")
                yield Static(classes="cursor", id="attention-cursor")
            with Vertical(id="attention-side"):
                yield Picture(max_rows=20, legend=False, id="attention-overlay")
                yield Static(classes="cursor", id="attention-overlay-note")
        with Vertical(id="attention-heads"):
            yield Picture(max_rows=HEAD_SIDE // 2, legend=False, id="attention-heads-picture")
            yield Static(id="attention-heads-captions")
        yield Static(
            Text(
                keys.hint(
                    self.app,
                    (("insights.left", "insights.down", "insights.up", "insights.right"), "cursor"),
                    (("insights.layer_prev", "insights.layer_next"), "layer"),
                    (("insights.head_prev", "insights.head_next"), "head"),
                    ("insights.rollout", "rollout"),
                    ("insights.heads", "heads by entropy"),
                ),
                style="dim",
            ),
            classes="hints",
        )

    # -- asking ----------------------------------------------------------------------------

    def reload(self) -> None:
        """Ask for the map (and the heads and overlay when shown) of the current context."""
        place = where(self.app)
        if place is None:
            return
        self.query_one("#attention-picture", Picture).placeholder("loading attention …")
        self.ask(
            "attention",
            tag="map",
            **place,
            layer=self.at_layer,
            head=self.head,
            sample=self.app.sample,
            rollout=self.rollout,
            width=MAP_SIDE,
            height=MAP_SIDE,
        )
        self._ask_heads()

    def _ask_heads(self) -> None:
        place = where(self.app)
        if place is None or not self.show_heads:
            return
        self.ask(
            "attention_heads",
            tag="heads",
            **place,
            layer=self.at_layer,
            sample=self.app.sample,
            side=HEAD_SIDE,
        )

    def _overlay_request(self, query: int) -> dict[str, Any] | None:
        """Where query token ``query`` looks, over the input picture: asked for a vision
        model's map only (one with a patch grid)."""
        place = where(self.app)
        if place is None or not self.reply or not self.reply.get("grid"):
            return None
        return {
            **place,
            "layer": self.at_layer,
            "head": self.head,
            "sample": self.app.sample,
            "query": query,
            "rollout": self.rollout,
            "width": 64,
            "height": 64,
        }

    def _ask_overlay(self) -> None:
        """Ask for the cursor's row's overlay: drawn now when the client holds it (fetched
        while the cursor rested), else the one on screen stays, with a cue once it takes
        ``CUE_AFTER_S``."""
        request = self._overlay_request(self.cursor[0])
        if request is None:
            return
        if not self.ask("attention_overlay", tag="overlay", **request):
            self.overlay_cue.start()
        if self._neighbours_timer is not None:
            self._neighbours_timer.stop()
        self._neighbours_timer = self.set_timer(NEIGHBOURS_AFTER_S, self._prefetch_neighbours)

    def _prefetch_neighbours(self) -> None:
        """Once the cursor rests, fetch the overlays of the rows above and below (``j``/``k``
        next), so that the move draws in the cursor's frame."""
        self._neighbours_timer = None
        data = self.app.data
        if data is None or not self.screen.is_current or not self.reply:
            return
        rows = np.asarray(self.reply["map"]).shape[0]
        below, above = self.cursor[0] + 1, self.cursor[0] - 1
        asked = [self._overlay_request(q) for q in (below, above) if 0 <= q < rows]
        requests = [("attention_overlay", r) for r in asked if r is not None]
        self.run_worker(
            lambda: prefetch_all(data, requests),
            group="attention-neighbours",
            exclusive=True,
            thread=True,
            exit_on_error=False,
        )

    def _overlay_loading(self) -> None:
        note = Text(f"loading where query {self.cursor[0]} looks …", style=colors.WARN)
        self.query_one("#attention-overlay-note", Static).update(note)

    def answered(self, tag: str, result: Any) -> None:
        if tag == "map":
            self.reply = result
            self._clamp_cursor()
            self._draw_map()
            self.query_one("#attention-side").set_class(bool(result.get("grid")), "shown")
            self._ask_overlay()
        elif tag == "overlay":
            self.overlay_cue.stop()
            self._draw_overlay(result)
        elif tag == "heads":
            self._draw_heads(result)

    def failed(self, tag: str, message: str) -> None:
        if tag == "map":
            self.reply = None
            self.query_one("#attention-picture", Picture).placeholder(message)
            self.query_one("#attention-cursor", Static).update("")
        elif tag == "overlay":
            self.overlay_cue.stop()
            self.query_one("#attention-overlay", Picture).placeholder(message)
        else:
            self.notify(message, severity="error", timeout=6)

    # -- what the keys do -------------------------------------------------------------------

    def move(self, rows: int, cols: int) -> None:
        if not self.reply:
            return
        old_row = self.cursor[0]
        self.cursor = (self.cursor[0] + rows, self.cursor[1] + cols)
        self._clamp_cursor()
        self._draw_cursor()
        if self.cursor[0] != old_row:
            self._ask_overlay()

    def step_layer(self, delta: int) -> None:
        layers = (self.reply or {}).get("layers") or []
        if layers:
            self.at_layer = (self.at_layer + delta) % len(layers)
            self.reload()

    def step_head(self, delta: int) -> None:
        heads = (self.reply or {}).get("heads")
        if not isinstance(heads, int) or heads < 1:
            self.notify("this layer's attention has one head.", timeout=3)
            return
        choices = [None, *range(heads)]  # the mean of the heads, then each head
        self.head = choices[(choices.index(self.head) + delta) % len(choices)]
        self.rollout = False
        self.reload()

    def toggle_rollout(self) -> None:
        self.rollout = not self.rollout
        self.reload()

    def toggle_heads(self) -> None:
        """Show or hide the heads strip; the map keeps its reply and only changes size."""
        self.show_heads = not self.show_heads
        self.query_one("#attention-heads").set_class(self.show_heads, "shown")
        if self.reply:
            self._draw_map()
        self._ask_heads()

    # -- drawing ---------------------------------------------------------------------------

    def _labels(self) -> list[str] | None:
        tokens = (self.reply or {}).get("tokens")
        if not tokens or (self.reply or {}).get("downsampled"):
            return None
        return [shown_token(t) for t in tokens]

    def _what(self) -> str:
        reply = self.reply or {}
        if reply.get("rollout"):
            return "rollout through every layer"
        head = reply.get("head")
        heads = reply.get("heads")
        which = "mean of the heads" if head is None else f"head {head}"
        if isinstance(heads, int) and heads > 1:
            which += f" (of {heads})"
        return f"{reply.get('module')} · {which}"

    def _draw_map(self) -> None:
        reply = self.reply
        if reply is None:
            return
        values = np.asarray(reply["map"], dtype=np.float32)
        shape = reply.get("shape") or list(values.shape)
        layers = reply.get("layers") or []
        title = Text(f"layer {self.at_layer + 1}/{len(layers)} ", style="bold")
        if reply.get("recomputed"):  # first: fused attention's weights are tvis's, not the model's
            title.append(f"({reply['recomputed']}) ", style="yellow")
        title.append(f"{self._what()} · sample {reply.get('sample')} · ")
        title.append(f"{shape[0]}×{shape[1]} tokens (query rows × key columns)")
        if reply.get("downsampled"):
            title.append(f" · shown {values.shape[0]}×{values.shape[1]} block means", "yellow")
        self.query_one(".title", Static).update(title)
        masked = None
        if reply.get("causal") and values.shape[0] == values.shape[1]:
            masked = (values == 0) & np.triu(np.ones(values.shape, dtype=bool), 1)
        labels = self._labels()
        picture = self.query_one("#attention-picture", Picture)
        picture.max_rows = self._map_rows()
        picture.cursor = self.cursor
        picture.show_values(
            values,
            Scale.of(values),
            x_labels=labels,
            y_labels=labels,
            legend="causal mask" if reply.get("causal") else "",
            masked=masked,
        )
        self._draw_cursor()

    def _map_rows(self) -> int:
        """Rows the map may fill: the view's height less its chrome and the heads strip."""
        height = self.size.height or self.app.size.height - 4
        heads = HEAD_SIDE // 2 + 1 if self.show_heads else 0
        return max(4, height - CHROME_ROWS - heads)

    def on_resize(self) -> None:
        if self.reply:
            self._draw_map()

    def _clamp_cursor(self) -> None:
        if not self.reply:
            return
        h, w = np.asarray(self.reply["map"]).shape
        self.cursor = (min(max(self.cursor[0], 0), h - 1), min(max(self.cursor[1], 0), w - 1))

    def _draw_cursor(self) -> None:
        reply = self.reply
        if not reply:
            return
        row, col = self.cursor
        values = np.asarray(reply["map"])
        self.cursor_value = float(values[row, col])
        self.query_one("#attention-picture", Picture).set_cursor(self.cursor)
        tokens = reply.get("tokens")
        text = Text()
        if tokens and not reply.get("downsampled"):
            text.append(f"query {row} ", style="bold")
            text.append(repr(shown_token(tokens[row])))
            text.append(f" → key {col} ", style="bold")
            text.append(repr(shown_token(tokens[col])))
        else:
            text.append(f"row {row} → col {col}", style="bold")
        masked = reply.get("causal") and col > row and self.cursor_value == 0
        text.append(": weight ")
        text.append(fmt.num(self.cursor_value, 6), style="bold")
        if masked:
            text.append(" (masked: a token never looks ahead)", style="dim")
        if reply.get("downsampled"):
            text.append(" (mean of a block of the full map)", style="yellow")
        self.query_one("#attention-cursor", Static).update(text)

    def _draw_overlay(self, result: dict[str, Any]) -> None:
        picture = self.query_one("#attention-overlay", Picture)
        weights = np.asarray(result["map"], dtype=np.float32)
        # Stretched from its lowest to its highest weight: an early layer's [CLS] looks
        # almost evenly, and scaled by the peak alone the whole picture would glow.
        picture.show_rgb(overlay(result["image"], Scale.of(weights).unit(weights), alpha=0.6))
        note = Text(f"where {result.get('query_label')} looks", style="bold")
        note.append(f" ({'rollout' if result.get('rollout') else result.get('module')})")
        note.append(f" · low→high, peak {fmt.num(result.get('peak'))} · the cursor's row picks")
        self.query_one("#attention-overlay-note", Static).update(note)

    def _draw_heads(self, result: dict[str, Any]) -> None:
        """Every head side by side in one picture, on one shared scale so they compare,
        most focused (lowest entropy) first, separated by a masked column."""
        maps = np.asarray(result["maps"], dtype=np.float32)
        order = np.asarray(result["order"]).tolist()
        side_h, side_w = maps.shape[1:]
        montage = np.zeros((side_h, len(order) * (side_w + 1) - 1), dtype=np.float32)
        gaps = np.zeros(montage.shape, dtype=bool)
        captions = []
        for i, head in enumerate(order):
            x = i * (side_w + 1)
            montage[:, x : x + side_w] = maps[head]
            if x + side_w < montage.shape[1]:
                gaps[:, x + side_w] = True
            caption = f"h{head} H={fmt.num(float(result['entropy'][head]))}"
            captions.append(caption[:side_w].ljust(side_w + 1))
        picture = self.query_one("#attention-heads-picture", Picture)
        picture.show_values(montage, Scale.of(montage[~gaps]), masked=gaps)
        self.query_one("#attention-heads-captions", Static).update("".join(captions).rstrip())
