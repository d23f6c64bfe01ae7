"""Insights: what the model looks at and how it sorts what it sees — Attention, Grad-CAM
and Embeddings, one tab with a sub-view each. A sub-view appears only when the run holds
what it needs; otherwise its key shows one sentence saying why."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Container
from textual.timer import Timer
from textual.widgets import ContentSwitcher, Static

from tvis.tui import colors, keys
from tvis.tui.pages.page import Page
from tvis.tui.pane import AgentPane, prefetch_all
from tvis.tui.widgets.attention_view import AttentionView
from tvis.tui.widgets.embeddings_view import EmbeddingsView
from tvis.tui.widgets.gradcam_view import GradcamView

if TYPE_CHECKING:
    from textual import getters

    from tvis.tui.app import TvisApp

AHEAD_AFTER_S = 0.3
"""Rest after the last key before the page fetches what `e` shows (as Explore's
``NEIGHBOURS_AFTER_S``)."""

VIEWS = ("attention", "gradcam", "embeddings")
TITLES = {"attention": "Attention", "gradcam": "Grad-CAM", "embeddings": "Embeddings"}
KEYS = {"attention": "a", "gradcam": "c", "embeddings": "e"}
ABSENT = {
    "attention": "This run holds no attention weights: no softmax over query·key scores and no "
    "scaled_dot_product_attention call ran in a recorded training batch.",
    "gradcam": "This run holds no Grad-CAM maps: its model has no conv layers that feed the "
    "loss, or it was recorded with --no-gradcam.",
    "embeddings": "This run holds no per-sample representations and no embedding tables.",
}


class ViewBar(AgentPane):
    """The sub-view names with their keys; asks the agent which views the run feeds."""

    DEFAULT_CSS = "ViewBar { height: 1; padding: 0 1; background: $boost; }"

    def __init__(self) -> None:
        super().__init__()
        self.found: dict[str, Any] | None = None
        self.current: str | None = None
        self.error: str | None = None

    def render(self) -> Text:
        text = Text()
        if self.error is not None:
            return Text(self.error, style=colors.BAD)
        if self.found is None:
            return Text("asking the agent which insights this run holds …", style=colors.MUTED)
        for view in VIEWS:
            on = bool(self.found.get(view))
            style = "bold reverse" if view == self.current else ("" if on else colors.MUTED)
            text.append(f" {KEYS[view]} {TITLES[view]} ", style=style)
            if not on:
                text.append("(absent) ", style=colors.MUTED)
        return text

    def reload(self) -> None:
        run = getattr(self.app, "run_name", None)
        if run is not None:
            self.ask("insights", run=run)

    def answered(self, tag: str, result: Any) -> None:
        self.found, self.error = result, None
        page = self.screen
        if isinstance(page, InsightsPage):
            self.app.call_later(page.insights_found, result)

    def failed(self, tag: str, message: str) -> None:
        self.error = message
        self.refresh()


class InsightsPage(Page):
    """Attention · Grad-CAM · Embeddings for the open run."""

    if TYPE_CHECKING:
        app = getters.app(TvisApp)  # tvis's app, for the type checker

    BINDINGS: ClassVar[list[BindingType]] = [*keys.INSIGHTS]

    DEFAULT_CSS = """
    InsightsPage #insights-body { height: 1fr; }
    InsightsPage #insights-absent { padding: 1 2; }
    """

    def __init__(self) -> None:
        super().__init__()
        self.found: dict[str, Any] | None = None
        self.shown_view: str | None = None
        self._ahead_timer: Timer | None = None

    def key_handled(self) -> None:
        """Any key: once keys rest (``AHEAD_AFTER_S``), what the next keys show is fetched."""
        if self._ahead_timer is not None:
            self._ahead_timer.stop()
        self._ahead_timer = self.set_timer(AHEAD_AFTER_S, self._fetch_ahead)

    def on_screen_resume(self) -> None:
        self.key_handled()  # built ahead it fetched nothing: the visit is a rest of its own

    def _fetch_ahead(self) -> None:
        """In the background, what the next keys show: Grad-CAM's next mode and other
        class while it is shown (``GradcamView.ahead``), and the Embeddings view's
        projection while another view is (the run's, asked once: the client keeps the
        answer), so that the key draws without a round trip or the agent's work under it."""
        self._ahead_timer = None
        data = self.app.data
        if data is None or not self.is_current or self.found is None:
            return
        asked = []
        view = self.current_view()
        if isinstance(view, GradcamView):
            asked += view.ahead()
        if self.shown_view != "embeddings" and self.found.get("embeddings"):
            projection = self.query_one(EmbeddingsView).request()
            asked += [projection] if projection is not None else []
        if asked:
            self.run_worker(
                lambda: prefetch_all(data, asked),
                group="insights-ahead",
                exclusive=True,
                thread=True,
                exit_on_error=False,
            )

    def compose(self) -> ComposeResult:
        yield ViewBar()
        yield Container(id="insights-body")

    def on_mount(self) -> None:
        self.watch(self.app, "run_name", self._run_changed, init=False)
        self.watch(self.app, "batch", self._context_changed, init=False)
        self.watch(self.app, "sample", self._sample_changed, init=False)
        self.query_one(ViewBar).reload()

    # -- which views apply --------------------------------------------------------------------

    async def insights_found(self, found: dict[str, Any]) -> None:
        self.found = found
        body = self.query_one("#insights-body", Container)
        await body.remove_children()
        switcher = ContentSwitcher(
            AttentionView(id="attention"),
            GradcamView(found.get("gradcam_layers"), id="gradcam"),
            EmbeddingsView(found.get("repr_layers"), found.get("tables"), id="embeddings"),
            Static(id="insights-absent"),
        )
        await body.mount(switcher)
        first = next((v for v in VIEWS if found.get(v)), None)
        self._show(first or "attention")
        self.key_handled()  # the page's first rest, before any key of its own

    def _show(self, view: str) -> None:
        self.shown_view = view
        bar = self.query_one(ViewBar)
        bar.current = view
        bar.refresh()
        if self.found is None:
            return
        switcher = self.query_one(ContentSwitcher)
        if not self.found.get(view):
            absent = self.query_one("#insights-absent", Static)
            absent.update(Text(self.found.get(f"{view}_absent") or ABSENT[view]))
            switcher.current = "insights-absent"
            return
        switcher.current = view
        self.current_view().reload()

    def current_view(self) -> Any:
        """The visible sub-view widget, or None when the view is absent."""
        if self.found is None or self.shown_view is None or not self.found.get(self.shown_view):
            return None
        return self.query_one(f"#{self.shown_view}")

    # -- following the app ---------------------------------------------------------------------

    def _run_changed(self, *_: object) -> None:
        self.found = None
        self.query_one(ViewBar).reload()

    def _context_changed(self, *_: object) -> None:
        view = self.current_view()
        if view is not None:
            view.reload()

    def _sample_changed(self, *_: object) -> None:
        view = self.current_view()
        if view is not None and not isinstance(view, EmbeddingsView):
            view.reload()  # the embeddings view moves its selection instead of refetching

    # -- actions ---------------------------------------------------------------------------------

    def _call(self, method: str, *args: Any) -> None:
        view = self.current_view()
        handler = getattr(view, method, None) if view is not None else None
        if handler is not None:
            handler(*args)

    def action_view(self, view: str) -> None:
        self._show(view)

    def action_move(self, rows: int, cols: int) -> None:
        self._call("move", rows, cols)

    def action_layer(self, delta: int) -> None:
        self._call("step_layer", delta)

    def action_head(self, delta: int) -> None:
        self._call("step_head", delta)

    def action_rollout(self) -> None:
        self._call("toggle_rollout")

    def action_heads(self) -> None:
        self._call("toggle_heads")

    def action_which(self) -> None:
        self._call("toggle_which")

    def action_mode(self) -> None:
        self._call("next_mode")

    def action_search(self) -> None:
        self._call("search")

    def action_close_search(self) -> None:
        self._call("close_search")
