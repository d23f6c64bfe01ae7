"""Insights → Embeddings: PCA of every captured sample's representation at one depth,
coloured by class (or a language model's target token), slid through depth with keys; or
an embedding table's rows labelled by token, with search. The selected point is the
followed sample: choosing a point makes every page follow it, and ``[``/``]`` move it."""

from __future__ import annotations

from typing import Any

import numpy as np
from rich.style import Style
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Input, Static

from tvis.tui import fmt, keys
from tvis.tui.pane import AgentPane
from tvis.tui.widgets.insight_context import follow, shown_token, where
from tvis.tui.widgets.scatter import Scatter
from tvis.tui.widgets.search_box import SearchBox

MAX_POINTS = 2000
"""Points asked for: a terminal scatter shows fewer distinct pixels; the agent states how
it sampled when a run holds more."""

LEGEND_ROWS = 12
"""Labels listed in the legend, most frequent first; the rest are counted."""

SEARCH_LISTED = 8
"""Search hits named under the plot (all are marked on it)."""


class EmbeddingsView(AgentPane):
    """The Embeddings sub-view of the Insights page."""

    DEFAULT_CSS = """
    EmbeddingsView { height: 1fr; }
    EmbeddingsView .title { height: auto; }
    EmbeddingsView #embeddings-body { height: 1fr; }
    EmbeddingsView #embeddings-legend { width: 24; height: 1fr; padding-left: 1; }
    EmbeddingsView #embeddings-info { height: auto; }
    EmbeddingsView Input { display: none; height: 3; }
    EmbeddingsView Input.shown { display: block; }
    """

    def __init__(
        self, layers: list[str] | None = None, tables: list[dict] | None = None, **kwargs
    ) -> None:
        super().__init__(**kwargs)
        self.layer_names = list(layers or [])
        self.tables = list(tables or [])
        self.at_layer = len(self.layer_names) - 1
        self.table = 0
        self.source = "repr" if self.layer_names else "table"
        self.reply: dict[str, Any] | None = None
        self.selected: int | None = None
        self.hits = np.zeros(0, dtype=np.intp)

    def compose(self) -> ComposeResult:
        yield Static(classes="title")
        with Horizontal(id="embeddings-body"):
            yield Scatter(id="embeddings-scatter")
            yield Static(id="embeddings-legend")
        yield Static(id="embeddings-info")
        yield SearchBox(placeholder="token to find (enter keeps it, escape closes)")

    def on_mount(self) -> None:
        self.watch(self.app, "sample", self._followed, init=False)

    # -- asking ----------------------------------------------------------------------------

    def request(self) -> tuple[str, dict[str, Any]] | None:
        """What the view asks the agent for now (None: nothing to project): the projection
        is the run's, whatever batch or sample, so a page can fetch it ahead of `e`."""
        place = where(self.app)
        if place is None:
            return None
        if self.source == "repr" and self.layer_names:
            layer = self.layer_names[self.at_layer]
            return "embeddings", {"run": place["run"], "layer": layer, "max_points": MAX_POINTS}
        if self.tables:
            table = self.tables[self.table].get("module") or self.tables[self.table].get("param")
            return "embeddings", {"run": place["run"], "table": table, "max_points": MAX_POINTS}
        return None

    def reload(self) -> None:
        asked = self.request()
        if asked is None:
            return
        self.query_one(".title", Static).update("computing the projection on the agent …")
        self.ask(asked[0], tag="pca", **asked[1])

    def answered(self, tag: str, result: Any) -> None:
        self.reply = result
        scatter = self.query_one(Scatter)
        table = result.get("kind") == "table"
        labels = None if table else result.get("labels")
        scatter.show(result["points"], labels, result.get("tokens") if table else None)
        self.hits = np.zeros(0, dtype=np.intp)
        scatter.mark(self.hits)
        self._title()
        self._legend()
        self._select(self._followed_point() if result.get("kind") == "repr" else 0)

    def failed(self, tag: str, message: str) -> None:
        self.reply = None
        self.query_one(".title", Static).update(Text(message, style="bold"))
        self.query_one(Scatter).show(np.zeros((0, 2)), None)
        self.query_one("#embeddings-info", Static).update("")

    # -- what the keys do -------------------------------------------------------------------

    def step_layer(self, delta: int) -> None:
        if self.source == "repr" and self.layer_names:
            self.at_layer = (self.at_layer + delta) % len(self.layer_names)
        elif self.source == "table" and self.tables:
            self.table = (self.table + delta) % len(self.tables)
        self.reload()

    def next_mode(self) -> None:
        sources = [s for s, ok in (("repr", self.layer_names), ("table", self.tables)) if ok]
        if len(sources) < 2:
            self.notify(f"this run has only {_source_title(self.source)} to show.", timeout=3)
            return
        self.source = sources[(sources.index(self.source) + 1) % len(sources)]
        self.close_search()
        self.reload()

    def move(self, rows: int, cols: int) -> None:
        """j/k: the next or previous point (a search hit while searching); it becomes the
        followed sample."""
        if not self.reply or not len(self.reply["points"]):
            return
        delta = rows or cols
        order = self.hits if self.hits.size else np.arange(len(self.reply["points"]))
        at = int(np.searchsorted(order, self.selected if self.selected is not None else -1))
        if self.selected is not None and at < order.size and order[at] == self.selected:
            at += delta
        elif delta < 0:
            at -= 1
        self._choose(int(order[at % order.size]))

    def search(self) -> None:
        if (self.reply or {}).get("kind") != "table":
            tables = keys.shown(self.app, "insights.mode")
            self.notify(
                f"search names tokens of an embedding table: press {tables} for tables.", timeout=4
            )
            return
        box = self.query_one(Input)
        box.add_class("shown")
        box.focus()

    def close_search(self) -> None:
        box = self.query_one(Input)
        box.remove_class("shown")
        box.value = ""
        self.hits = np.zeros(0, dtype=np.intp)
        self.query_one(Scatter).mark(self.hits)
        self._info()

    @on(Input.Changed)
    def _search_changed(self, event: Input.Changed) -> None:
        tokens = (self.reply or {}).get("tokens") or []
        text = event.value
        if not text:
            self.hits = np.zeros(0, dtype=np.intp)
        else:
            exact = [i for i, t in enumerate(tokens) if t == text]
            self.hits = np.array(
                exact or [i for i, t in enumerate(tokens) if text.lower() in t.lower()],
                dtype=np.intp,
            )
        self.query_one(Scatter).mark(self.hits)
        if self.hits.size:
            self._select(int(self.hits[0]))
        else:
            self._info()

    @on(Input.Submitted)
    def _search_done(self, event: Input.Submitted) -> None:
        self.query_one(Scatter).focus()

    @on(Scatter.Picked)
    def _picked(self, event: Scatter.Picked) -> None:
        self._choose(event.index)

    # -- following the sample ----------------------------------------------------------------

    def _choose(self, index: int) -> None:
        reply = self.reply or {}
        self._select(index)
        if reply.get("kind") == "repr":
            follow(self.app, int(reply["batch"][index]), int(reply["sample"][index]))

    def _followed(self, *_: object) -> None:
        if (self.reply or {}).get("kind") == "repr":
            self._select(self._followed_point())

    def _followed_point(self) -> int | None:
        reply, place = self.reply or {}, where(self.app)
        if place is None or reply.get("kind") != "repr":
            return None
        hit = np.flatnonzero(
            (np.asarray(reply["batch"]) == place["batch"])
            & (np.asarray(reply["sample"]) == self.app.sample)
        )
        return int(hit[0]) if hit.size else None

    def _select(self, index: int | None) -> None:
        self.selected = index
        self.query_one(Scatter).select(index)
        self._info()

    # -- drawing ---------------------------------------------------------------------------

    def _title(self) -> None:
        reply = self.reply or {}
        explained = np.asarray(reply.get("explained", [0, 0]), dtype=np.float64)
        if reply.get("kind") == "repr":
            title = Text(f"depth {self.at_layer + 1}/{len(self.layer_names)} ", style="bold")
            title.append(f"{reply.get('layer')} · ", style="bold")
            title.append(f"PCA of {reply.get('total')} samples' representations")
        else:
            title = Text(f"table {reply.get('table')} ", style="bold")
            title.append(f"({reply.get('param')}, step {reply.get('step')}) · PCA of its rows")
        title.append(
            f" · PC1 {explained[0] * 100:.1f}% PC2 {explained[1] * 100:.1f}% of the variance"
        )
        title.append(f" · {reply.get('sampling')}", style="dim")
        layer = (("insights.layer_prev", "insights.layer_next"), "depth")
        if reply.get("kind") != "repr":
            layer = (layer[0], "table · " + keys.hint(self.app, ("insights.search", "search")))
        hints = keys.hint(
            self.app,
            layer,
            ("insights.mode", "layers/tables"),
            (("insights.down", "insights.up"), "point"),
        )
        title.append(f"   {hints}", style="dim")
        self.query_one(".title", Static).update(title)

    def _legend(self) -> None:
        reply, scatter = self.reply or {}, self.query_one(Scatter)
        legend = Text()
        labels = reply.get("labels")
        if reply.get("kind") == "repr" and labels is None:  # a GAN's or a regressor's samples
            legend.append(f"{len(reply.get('points', []))} samples", style="bold")
            self.query_one("#embeddings-legend", Static).update(legend)
            return
        if reply.get("kind") != "repr":
            words = "tokens" if reply.get("vocab") else "rows"
            legend.append(f"{len(reply.get('points', []))} {words}\n", style="bold")
            legend.append("/ finds a token;\nhits are white")
            self.query_one("#embeddings-legend", Static).update(legend)
            return
        names = reply.get("label_names") or {}
        kind = reply.get("label_kind") or "label"
        legend.append(f"coloured by\n{kind}\n", style="bold")
        values, counts = np.unique(np.asarray(labels), return_counts=True)
        ranked = sorted(zip(values.tolist(), counts.tolist(), strict=True), key=lambda v: -v[1])
        for label, count in ranked[:LEGEND_ROWS]:
            name = "unlabelled" if label < 0 else names.get(str(label), str(label))
            r, g, b = scatter.colour_of(label)
            legend.append("■ ", style=Style(color=f"rgb({r},{g},{b})"))
            legend.append(f"{shown_token(name)[:14]} {count}\n")
        if len(ranked) > LEGEND_ROWS:
            legend.append(f"+{len(ranked) - LEGEND_ROWS} more", style="dim")
        self.query_one("#embeddings-legend", Static).update(legend)

    def _info(self) -> None:
        reply, index = self.reply or {}, self.selected
        info = self.query_one("#embeddings-info", Static)
        if not reply or index is None or index >= len(reply.get("points", [])):
            info.update(
                Text("the followed sample is not among the points shown.", style="dim")
                if reply.get("kind") == "repr"
                else ""
            )
            return
        x, y = (float(v) for v in reply["points"][index])
        text = Text()
        if reply.get("kind") == "repr":
            text.append(
                f"batch {int(reply['batch'][index])} sample {int(reply['sample'][index])}",
                style="bold",
            )
            labels = reply.get("labels")
            if labels is not None:
                label = int(labels[index])
                name = (reply.get("label_names") or {}).get(str(label), str(label))
                text.append(f" · {reply.get('label_kind')}: {shown_token(name)}")
            text.append(" (followed on every page)", style="dim")
        else:
            token = reply["tokens"][index]
            text.append(f"row {int(reply['rows'][index])} {shown_token(token)!r}", style="bold")
        text.append(f" · PC1 {fmt.num(x)} PC2 {fmt.num(y)}")
        if self.hits.size:
            tokens = reply.get("tokens") or []
            shown = ", ".join(shown_token(tokens[i]) for i in self.hits[:SEARCH_LISTED])
            more = f" +{self.hits.size - SEARCH_LISTED}" if self.hits.size > SEARCH_LISTED else ""
            text.append(f"\n{self.hits.size} matches: {shown}{more} (jk moves between them)")
        info.update(text)


def _source_title(source: str) -> str:
    return "per-sample representations" if source == "repr" else "embedding tables"
