"""Replay: the recorded steps played back like training happening.

The batch loads and the followed sample goes through its transforms; each layer lights up
with its activation for that sample; the loss appears; gradients flow back up, each layer
with ‖dL/d(output)‖; the optimizer updates; the next batch starts. The agent's ``replay``
method gives the events; every picture is fetched lazily for the event on screen, and the
next frames' pictures are prefetched into the client's cache so playing never waits.

Layout: transport and scrubber on top; the input, result and update cards, the layer stack
and the current layer's views side by side (the cards fold into one line below 100
columns); one line saying what the recording lacks.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Horizontal, Vertical
from textual.timer import Timer
from textual.widgets import Static
from textual.worker import get_current_worker

from tvis.agent.replies import ReplayAnswer, ReplayDetail, ReplayEvent, replay_query
from tvis.store.schema import FLAGS, MIXES_SAMPLES
from tvis.tui import colors, fmt, keys
from tvis.tui.anomaly_start import opening_event, opening_seq
from tvis.tui.pages.page import Page
from tvis.tui.pane import AgentPane, prefetch_all
from tvis.tui.replay_model import (
    PAGE,
    SPEEDS,
    STEP_SIZES,
    Pace,
    Place,
    Recording,
    first_nonfinite,
)
from tvis.tui.widgets.layer_stack import LayerStack, thumb_requests
from tvis.tui.widgets.layer_views import (
    Layer,
    LayerViews,
    NeuronsView,
    PlaceKeys,
    opening_request,
)
from tvis.tui.widgets.replay_bar import Scrubber, phase_key, transport_text
from tvis.tui.widgets.replay_cards import (
    CardAnswered,
    InputCard,
    ResultCard,
    card_requests,
    update_text,
)

if TYPE_CHECKING:
    from textual import getters

    from tvis.tui.app import TvisApp

COMPACT_BELOW = 100
"""Columns below which the cards fold into one summary line (80×24 stays readable)."""

PREFETCH = 6
"""Frames whose pictures are fetched ahead while playing: about 1.5 s at 4 events/s,
enough to hide an ssh round trip, few enough that a seek wastes little."""

BESIDE_AFTER_S = 0.3
"""Rest of the cursor after which the page fetches what its next keys show: the layer's
other views (``v``), the start and the end of the recording (``home``, ``end``). Keys
repeated faster than this ask nothing ahead (as Explore's ``NEIGHBOURS_AFTER_S``)."""

DEFAULT_SPEED = 2
"""Index into SPEEDS: 4 events a second."""


class EventFeed(AgentPane):
    """Fetches the recording's event pages for the page (a line of text: the transport)."""

    DEFAULT_CSS = "EventFeed { height: 1; }"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.line = Text()

    def render(self) -> Text:
        return self.line

    def load(
        self, run: str, sample: int, detail: ReplayDetail, expand: list[int], offset: int = 0
    ) -> None:
        query = replay_query(run, sample, detail, expand, offset)
        if not offset:
            self.cancel("rest")  # the rest of a list asked for before
        self.ask("replay", tag=f"page:{offset // PAGE}" if offset else "first", **query)

    def load_rest(self, run: str, sample: int, detail: ReplayDetail, expand: list[int]) -> None:
        """The whole run's outline, after a first answer that covered part of it."""
        query = replay_query(run, sample, detail, expand, whole=True)
        self.ask("replay", tag="rest", **query)

    def answered(self, tag: str, result: ReplayAnswer) -> None:
        page = self.screen
        if isinstance(page, ReplayPage):
            page.events_arrived(tag, result)

    def failed(self, tag: str, message: str) -> None:
        page = self.screen
        if isinstance(page, ReplayPage):
            page.say_missing(message)


class ReplayPage(PlaceKeys, Page):
    """The Replay page."""

    if TYPE_CHECKING:
        app = getters.app(TvisApp)  # tvis's app, for the type checker

    BINDINGS: ClassVar[list[BindingType]] = [*keys.REPLAY, *keys.LAYER_VIEWS]

    DEFAULT_CSS = """
    ReplayPage #body { height: 1fr; }
    ReplayPage #cards { width: 30; height: 1fr; border-right: vkey $panel-lighten-2; }
    ReplayPage #cards > Static { height: auto; padding: 0 1; }
    ReplayPage #stack { width: 46; border-right: vkey $panel-lighten-2; }
    ReplayPage.-compact #stack { width: 36; }
    ReplayPage #right { width: 1fr; height: 1fr; padding: 0 1; }
    ReplayPage #event-title { height: 2; }
    ReplayPage #summary { height: 2; display: none; padding: 0 1; }
    ReplayPage #missing { height: 1; padding: 0 1; }
    ReplayPage #key { height: 1; padding: 0 1; }
    ReplayPage.-compact #cards { display: none; }
    ReplayPage.-compact.-loading #cards { display: block; }
    ReplayPage.-compact.-loading #stack { display: none; }
    ReplayPage.-compact #summary { display: block; }
    ReplayPage.-compact #key { display: none; }
    """

    def __init__(self) -> None:
        super().__init__()
        self.recording: Recording | None = None
        self.cursor = 0
        self.playing = False
        self.size_name = "layer"
        self.expanded: set[int] = set()  # light groups opened into their calls (first batch)
        self.speed = DEFAULT_SPEED
        self.pace = Pace()  # frames drawn while playing: the speed label says what is real
        self.ended = False
        self._timer: Timer | None = None
        self._asked_pages: set[int] = set()
        self._keep: ReplayEvent | Place | None = None  # the event to land on after a reload
        self._opening: Place | None = None  # a watched run's anomaly, at first load
        self._note = ""
        self._texts: dict[str, Text] = {}
        self._origin: Place | None = None  # the NaN origin to open on, until found
        self._landed: int | None = None  # where a partial first answer put the cursor
        self._landed_keep: ReplayEvent | Place | None = None  # what it was to land on
        self._unseen = False  # the cursor moved while another page was shown
        self._rest_wanted = False  # the rest of a partly built list, not asked yet
        self._loading = False  # the event on screen is a batch loading (its data phase)
        self._beside_timer: Timer | None = None
        # The layer's views (≈ 20 widgets) are mounted when the cursor first rests or a
        # layer first plays: the page opens on a batch loading, which shows none, and builds
        # and styles that much less before its first screen.
        self._views = LayerViews(id="views")

    def compose(self) -> ComposeResult:
        yield EventFeed(id="transport")
        yield Scrubber(id="scrubber")
        yield Static(phase_key(), id="key")
        with Horizontal(id="body"):
            with Vertical(id="cards"):
                yield InputCard(id="input")
                yield ResultCard(id="result")
                yield Static(id="update")
            yield LayerStack(id="stack")
            with Vertical(id="right"):
                yield Static(id="event-title")
                yield Static(id="summary")
        yield Static(id="missing")

    def on_mount(self) -> None:
        self.watch(self.app, "run_name", self._run_changed, init=False)
        self.watch(self.app, "run_info", self._run_info_changed, init=False)
        self.watch(self.app, "sample", self._reload, init=False)
        self.watch(self.app, "batch", self._batch_changed, init=False)
        self._timer = self.set_interval(1 / SPEEDS[self.speed], self._tick, pause=True)
        self._fit()
        self._reload()

    def on_resize(self) -> None:
        self._fit()
        self._draw_transport()

    def _fit(self) -> None:
        """Compact below ``COMPACT_BELOW`` columns, where a loading batch shows its input card
        in the stack's place. A class on the page restyles all of its widgets, so ``-loading``
        is set only where it changes something: compact."""
        compact = self.app.size.width < COMPACT_BELOW
        self.set_class(compact, "-compact")
        self.set_class(compact and self._loading, "-loading")

    # -- the recording -----------------------------------------------------------------------

    def _detail(self) -> ReplayDetail:
        return "call" if self.size_name == "call" else "layer"

    def _reload(self, *_: Any) -> None:
        run = self.app.run_name
        if run is None:
            return
        self._keep = self.current_event()
        self._opening = None
        if self.recording is None:  # a watched run opens on its anomaly
            self._keep = self._opening = opening_event(self.app.run_info)
        self._asked_pages = {0}
        self._rest_wanted = False  # the new first answer says whether a rest is wanted
        self.query_one(EventFeed).load(run, self.app.sample, self._detail(), sorted(self.expanded))

    def _run_changed(self, *_: Any) -> None:
        self.expanded.clear()  # light groups are named by batches of the run left behind
        self._reload()

    def _run_info_changed(self, *_: Any) -> None:
        # A run being recorded gains batches: take the new events, stay where we are.
        if self.recording is not None and self.app.run_status == "running":
            self._reload()

    def events_arrived(self, tag: str, result: ReplayAnswer) -> None:
        offset = result.events[0].seq if result.events else 0
        if tag == "first":
            first = self.recording is None
            # Where the cursor is now, not where it was when asked: a poll of a run being
            # recorded reloads, and a key pressed meanwhile must not be undone.
            keep = self.current_event() or self._keep
            self.recording = Recording.from_reply(result)
            self._keep = None
            if first and self._opening is None:  # a run that went wrong opens where it did
                self._origin = first_nonfinite(self.app.run_info)
            self.cursor = self._landing(keep, first and self._opening is None)
            self._landed = None
            if not self.recording.complete:  # a big run's first page: the rest once shown
                self._landed, self._landed_keep = self.cursor, keep
                self._rest_wanted = True
                self._load_rest()
            self._show_missing()
        elif tag == "rest" and self.recording is not None:
            self.recording.completed(result)
            if self._landed is not None and self.cursor == self._landed:
                # Not moved since the first page: land where the whole list says.
                self.cursor = self._landing(self._landed_keep, self._origin is not None)
            self._landed = self._landed_keep = None
            self._show_missing()
        elif self.recording is not None:
            self.recording.add_page(offset, result.events)
            if self._origin is not None:  # its page came: from its phase to its call
                self.cursor = self._seek_origin(self.cursor)
        self.frame()

    def _landing(self, keep: ReplayEvent | Place | None, seek_origin: bool) -> int:
        """Where a (re)loaded recording opens: on ``keep``, else the app's batch; on a
        watched run's anomaly; with ``seek_origin``, on the first non-finite value."""
        rec = self.recording
        if rec is None:
            return 0
        target = rec.find(keep) if keep else self._batch_start()
        if self._opening is not None:
            target = opening_seq(rec, self._opening)
        if seek_origin:
            target = self._seek_origin(target)
        return max(0, min(target, rec.total - 1))

    def _seek_origin(self, otherwise: int) -> int:
        """Where the first non-finite value arose (``otherwise`` in a run without one);
        the origin is forgotten once its exact event is found or the user moves."""
        origin, rec = self._origin, self.recording
        if origin is None or rec is None or origin.batch is None:
            return otherwise
        seq, exact = rec.find_call(origin.batch, origin.call, origin.phase)
        if exact:
            self._origin = None
        return seq

    def _fetch_pages(self) -> None:
        rec, run = self.recording, self.app.run_name
        if rec is None or run is None:
            return
        for page in rec.missing_pages(self.cursor):
            if page not in self._asked_pages:
                self._asked_pages.add(page)
                feed = self.query_one(EventFeed)
                feed.load(run, rec.sample, rec.detail, sorted(self.expanded), page * PAGE)

    def current_event(self) -> ReplayEvent | None:
        return self.recording.event(self.cursor) if self.recording else None

    # -- one frame -----------------------------------------------------------------------------

    def frame(self) -> None:
        """Draw what the event under the cursor shows; fetch what it needs; prefetch ahead."""
        rec, run = self.recording, self.app.run_name
        self._fetch_pages()
        self._draw_transport()
        self.query_one(Scrubber).show(rec, self.cursor)
        event = self.current_event()
        if rec is None or run is None or event is None:
            return
        batch, sample = event.batch, self.app.sample
        events = rec.batch_events(batch)
        stack = self.query_one(LayerStack)
        stack.load(run, batch, sample, events)
        stack.show(event)
        phase, kind = event.phase, event.kind
        if event.group is not None:  # a light group has no input or loss of its own
            self.query_one(InputCard).light(batch)
            self.query_one(ResultCard).reach(False)
        else:
            self.query_one(InputCard).load(run, batch, sample)
            self.query_one(InputCard).show_stage(event.call if kind == "stage" else None)
            row = rec.batch_row(batch)
            result = self.query_one(ResultCard)
            result.load(run, batch, sample, row["loss"] if row else None)
            result.reach(phase in ("loss", "backward", "optimizer"))
        updates = [e for e in events if e.kind == "update"]
        self._put("#update", update_text(updates, phase == "optimizer", 32))
        self._put("#event-title", self._event_title(event), layout=False)
        self._put("#summary", self._summary(event, updates), layout=False)
        views = self._views
        # Data, update and collapsed events have no layer of their own: the cards say it all.
        views.display = kind in ("layer", "grad", "loss")
        if views.display and views.parent is None:
            self.query_one("#right").mount(views)
        # While the batch loads, compact terminals show the input card where the layers
        # will be: no layer has a value yet, and the sample is what there is to see.
        self._loading = kind in ("batch", "stage") and event.group is None
        self._fit()
        if kind in ("layer", "grad"):
            self._show_layer(self._layer(event))
        elif kind == "loss":
            # The loss is computed from the model's output: show the last layer's.
            last = [e for e in events if e.kind == "layer"]
            if last:
                self._show_layer(self._layer(last[-1]))
        self._sync_batch(batch)
        self._prefetch()
        self._rest_then_prefetch()

    def on_card_answered(self, message: CardAnswered) -> None:
        """A card's answer came after the frame: the compact summary line says it too."""
        message.stop()
        event, rec = self.current_event(), self.recording
        if event is not None and rec is not None:
            updates = [e for e in rec.batch_events(event.batch) if e.kind == "update"]
            self._put("#summary", self._summary(event, updates), layout=False)

    def _show_layer(self, layer: Layer) -> None:
        views = self._views
        if views.ready:
            views.show(layer)
        else:  # being mounted: it shows its layer as it mounts
            views.shown_layer = layer

    def _put(self, selector: str, text: Text, layout: bool = True) -> None:
        """Update a line of text only when it changed: every update costs a repaint (and a
        layout pass with ``layout``), which at 30 frames a second adds up."""
        if self._texts.get(selector) != text:
            self._texts[selector] = text
            self.query_one(selector, Static).update(text, layout=layout)

    def _layer(self, event: ReplayEvent) -> Layer:
        return Layer(
            run=self.app.run_name or "",
            batch=event.batch,
            call=event.call if event.call is not None else -1,
            sample=self.app.sample,
            grad=event.kind == "grad",
            tensor=event.tensor,
            name=event.name,
        )

    def _event_title(self, event: ReplayEvent) -> Text:
        kind, phase = event.kind, event.phase
        text = Text(f"{colors.phase_label(phase)} ", style=f"bold {colors.phase_color(phase)}")
        name = event.name
        if kind == "batch":
            text.append(f"{name} loads", style="bold")
            text.append(" · the followed sample goes through its transforms", style=colors.MUTED)
        elif kind == "stage":
            text.append(f"transform {name}", style="bold")
            text.append(" · its output is in the input card", style=colors.MUTED)
        elif kind == "layer":
            text.append(f"{name}", style="bold")
            text.append(f" {event.cls or ''} → {fmt.shape(event.shape)}", style=colors.MUTED)
            text.append(f" · mean|x| {fmt.num(event.absmean)}", style=colors.MUTED)
            if event.group is not None:
                key = keys.shown(self.app, "replay.light")
                text.append(f" · in a light group, no gradients · {key} closes", colors.MUTED)
        elif kind == "grad":
            text.append(f"dL/d {name}", style="bold")
            text.append(f" · ‖dL/d(output)‖ {fmt.num(event.grad_norm)}", style=colors.MUTED)
        elif kind == "loss":
            text.append(f"{event.fn or name} = {fmt.num(event.value)}", style="bold")
            text.append(f" ({event.reduction or '?'} over the batch)", style=colors.MUTED)
        elif kind == "update":
            text.append(f"{name} steps", style="bold")
            text.append(
                f" · lr {fmt.num(event.lr)} · {event.n_params} parameters",
                style=colors.MUTED,
            )
        elif kind == "light":
            text.append(name, style="bold")
            key = keys.shown(self.app, "replay.light")
            calls = f"{event.n_calls} calls"
            if event.open:
                text.append(f" · its {calls} follow, statistics only", style=colors.MUTED)
            else:
                text.append(f" · {calls} in one event (statistics only)", style=colors.MUTED)
            text.append(counted_note(event), style=colors.MUTED)
            text.append(f" · {key} {'closes' if event.open else 'opens them'}", colors.MUTED)
        for key in event.flags:
            flag = FLAGS.get(key)
            if flag is not None and (flag.warning or key == MIXES_SAMPLES):
                style = colors.BAD if flag.severity == "bad" else colors.WARN
                text.append(f"  {flag.symbol} {flag.label}".replace("   ", "  "), style=style)
        return text

    def _summary(self, event: ReplayEvent, updates: list[ReplayEvent]) -> Text:
        """The cards in one line, for compact terminals."""
        result = self.query_one(ResultCard)
        text = Text(f"sample {self.app.sample}", style=colors.PHASE["data"])
        target = self.query_one(InputCard).target
        if target:
            text.append(f" · target {fmt.clip(target, 20)}")
        table = (result.table if result.reached else None) or {}
        rows = table.get("rows") or []
        row = next((r for r in rows if r.get("sample") == self.app.sample), None)
        if row is not None and table.get("kind") == "samples":
            text.append(f" → {row.get('pred_name') or row.get('pred')}", style="bold")
            text.append(f" p {fmt.num(row.get('p_target'), 2)} loss {fmt.num(row.get('loss'), 3)}")
        if event.phase == "optimizer" and updates and updates[0].top:
            top = updates[0].top[0]
            text.append(
                f" · moved most {top['name']} {fmt.num(top['ratio'], 2)}",
                style=colors.PHASE["optimizer"],
            )
        return text

    def _draw_transport(self) -> None:
        feed = self.query_one(EventFeed)
        feed.line = transport_text(
            self.recording,
            self.current_event(),
            self.cursor,
            self.playing,
            self.size_name,
            SPEEDS[self.speed],
            (self.app.size.width or 80) - 1,
            self._light_hint(),
            self.pace.rate(),
        )
        feed.refresh()

    def _light_hint(self) -> str:
        """``o opens`` / ``o closes`` on a light group's events, for the transport line."""
        event = self.current_event()
        if event is None or event.group is None:
            return ""
        opened = event.group in self.expanded
        return f"{keys.shown(self.app, 'replay.light')} {'closes' if opened else 'opens'}"

    def _show_missing(self) -> None:
        rec = self.recording
        notes = list(rec.missing) if rec else []
        if rec is not None and not rec.total:
            notes.insert(0, "this run has no training batch to replay yet.")
        self._note = (
            notes[0] + (f" (+{len(notes) - 1} more)" if len(notes) > 1 else "") if notes else ""
        )
        self._draw_missing()

    def say_missing(self, message: str) -> None:
        self._note = message
        self._draw_missing()

    def _draw_missing(self) -> None:
        # One line, cut with an ellipsis (notes put what to act on first); the end of the
        # recording, short, goes before the note so a long note cannot hide it.
        text = Text(no_wrap=True, overflow="ellipsis")
        if self.ended:
            text.append("end of the recording (home: start again)", style=colors.MUTED)
            text.append("  · " if self._note else "", style=colors.MUTED)
        text.append(self._note, style=colors.WARN)
        self._put("#missing", text, layout=False)

    def _batch_start(self) -> int:
        """The first event of the app's batch (where the run opens: its first training
        batch), or the recording's start."""
        row = self.recording.batch_row(self.app.batch) if self.recording else None
        return int(row["start"]) if row is not None else 0

    def _sync_batch(self, batch: int | None) -> None:
        # The app's batch is the recorded index (light groups leave gaps), as events name it.
        if batch in self.app.batch_indices and batch != self.app.batch:
            self.app.batch = batch

    def _batch_changed(self, index: int) -> None:
        """The user moved to another batch (``,`` ``.``): play from its start."""
        event, rec = self.current_event(), self.recording
        if rec is None or index not in self.app.batch_indices:
            return
        if event is not None and event.batch == index:
            return
        row = rec.batch_row(index)
        if row is None:
            return
        if self.is_current:
            self.seek(int(row["start"]))
        else:
            # Switched on another page: no frame (its pictures, cards and the agent's
            # requests for them) until this page is shown again.
            self._origin = None
            self.cursor = max(0, min(rec.total - 1, int(row["start"])))
            self._unseen = True
            if self.ended and self.cursor < rec.total - 1:
                self.ended = False
                self._draw_missing()

    def _load_rest(self) -> None:
        """Ask for the rest of a partly built list while this page is shown: the agent's
        longest build then never competes with the page the user went to instead."""
        rec, run = self.recording, self.app.run_name
        if not self._rest_wanted or not self.is_current or rec is None or run is None:
            return
        self._rest_wanted = False
        self.query_one(EventFeed).load_rest(run, rec.sample, rec.detail, sorted(self.expanded))

    def on_screen_resume(self) -> None:
        self._load_rest()
        if self._unseen:
            self._unseen = False
            self.frame()
        else:  # framed while hidden, which fetched nothing beside: now it is shown
            self._rest_then_prefetch()

    # -- prefetch ------------------------------------------------------------------------------

    def _prefetch(self) -> None:
        """While playing, fetch in the background the pictures of the next ``PREFETCH``
        frames play will draw (each a step of the current size: events it skips are never
        drawn). Paused, nothing: the next key may go anywhere, and what it will show is
        ``_prefetch_beside``'s, once the cursor rests."""
        rec, views = self.recording, self._views
        if rec is None or not self.playing:
            return
        requests = []
        seq = self.cursor
        for _ in range(PREFETCH * 2):  # bounded: a run of frames without a layer asks nothing
            following = rec.step(seq, self.size_name, 1)
            if following == seq:
                break
            seq = following
            event = rec.event(seq)
            if event is None or event.kind not in ("layer", "grad"):
                continue
            request = views.request(self._layer(event))
            if request is not None:
                requests.append(request)
            if len(requests) >= PREFETCH:
                break
        if requests:
            self._warm(requests)

    def _rest_then_prefetch(self) -> None:
        if self._beside_timer is not None:
            self._beside_timer.stop()
        self._beside_timer = self.set_timer(BESIDE_AFTER_S, self._prefetch_beside)

    def _prefetch_beside(self) -> None:
        """Once the cursor rests (not playing, the page shown), fetch in the background what
        ``v``, ``.``, ``,``, ``home`` and ``end`` show from here, so each draws from the
        client's cache in the key's frame; only warms the cache, so a guess never lands on
        screen."""
        self._beside_timer = None
        rec, run, data, views = self.recording, self.app.run_name, self.app.data, self._views
        if self.playing or not self.is_current or rec is None or run is None or data is None:
            return
        if views.parent is None:  # mounted (hidden) at rest: the first layer played shows it
            self.query_one("#right").mount(views)
        event = self.current_event()
        if not views.ready:  # still mounting (a loaded machine fires the rest first)
            self._rest_then_prefetch()  # what `v` shows is asked once they exist
            return
        jobs: list[Callable[[Any], None]] = []
        if event is not None and event.kind in ("layer", "grad", "loss"):
            layer = views.shown_layer
            if layer is not None:
                jobs.append(views.others_fetcher(layer))
        asked: list[tuple[str, dict[str, Any]]] = []
        if event is not None:  # what a step or a phase either way shows (l h n N)
            asked += self._layers_beside(rec, event)
        sample = self.app.sample
        for seq in dict.fromkeys((*self._batch_starts_beside(rec, event), 0, rec.total - 1)):
            far = rec.event(seq)
            if far is None or event is None or far.batch == event.batch or far.group is not None:
                continue
            far_events = rec.batch_events(far.batch)
            asked += card_requests(run, far.batch, sample)
            asked += [("thumbs", p) for _, p in thumb_requests(run, far.batch, sample, far_events)]
            if far.kind in ("layer", "grad"):
                request = views.request(self._layer(far))
                if request is not None:
                    asked.append(request)
        if event is not None and event.group is None:
            asked += self._samples_beside(rec, run, event.batch)
        if asked:
            jobs.append(lambda data: prefetch_all(data, asked))
        if jobs:
            self.run_worker(
                lambda: [job(data) for job in jobs],
                group="replay-beside",
                exclusive=True,
                thread=True,
                exit_on_error=False,
            )

    def _batch_starts_beside(self, rec: Recording, event: ReplayEvent | None) -> list[int]:
        """Where `.` and `,` land from ``event``'s batch: the first event of the next
        recorded batch and of the previous one."""
        indices = self.app.batch_indices
        if event is None or event.batch not in indices:
            return []
        at = indices.index(event.batch)
        rows = [rec.batch_row(indices[p]) for p in (at + 1, at - 1) if 0 <= p < len(indices)]
        return [int(row["start"]) for row in rows if row is not None]

    def _layers_beside(
        self, rec: Recording, event: ReplayEvent
    ) -> list[tuple[str, dict[str, Any]]]:
        """The layer views' requests for the layers a step or a phase away in this batch."""
        views, asked = self._views, []
        for size, delta in ((self.size_name, 1), (self.size_name, -1), ("phase", 1), ("phase", -1)):
            near = rec.event(rec.step(self.cursor, size, delta))
            if near is None or near.batch != event.batch or near.kind not in ("layer", "grad"):
                continue
            layer = self._layer(near)
            request = views.request(layer) if views.ready else opening_request(layer)
            if request is not None and request not in asked:
                asked.append(request)
        return asked

    def _samples_beside(
        self, rec: Recording, run: str, batch: int
    ) -> list[tuple[str, dict[str, Any]]]:
        """What `]` and `[` ask for (the next sample's first): its event list, and the
        cards' pictures and the layers' thumbnails of this batch for it. Drawn from the
        cache, the key is one frame, not one per answer (three, 60–120 ms)."""
        size = (self.app.batch_info or {}).get("batch_size") or 1
        sample, events = self.app.sample, rec.batch_events(batch)
        asked: list[tuple[str, dict[str, Any]]] = []
        for other in dict.fromkeys(((sample + 1) % size, (sample - 1) % size)):
            if other == sample:
                continue
            query = replay_query(run, other, self._detail(), sorted(self.expanded))
            asked.append(("replay", dict(query)))
            asked += card_requests(run, batch, other)
            asked += [("thumbs", p) for _, p in thumb_requests(run, batch, other, events)]
        return asked

    @work(thread=True, exclusive=True, group="replay-prefetch", exit_on_error=False)
    def _warm(self, requests: list[tuple[str, dict[str, Any]]]) -> None:
        # Exclusive: a seek starts a new prefetch and cancels this one between requests.
        worker = get_current_worker()
        data = self.app.data
        for method, params in requests:
            if worker.is_cancelled or data is None:
                return
            data.prefetch_later(method, **params)  # behind what the frame on screen asks

    # -- moving --------------------------------------------------------------------------------

    def seek(self, seq: int) -> None:
        rec = self.recording
        if rec is None or not rec.total:
            return
        self._origin = None  # the user moved: stay where they went
        self.cursor = max(0, min(rec.total - 1, seq))
        if self.ended and self.cursor < rec.total - 1:
            self.ended = False
            self._draw_missing()
        self.frame()

    def on_scrubber_seek(self, message: Scrubber.Seek) -> None:
        message.stop()
        self.seek(message.seq)

    def _tick(self) -> None:
        rec = self.recording
        if rec is None or not rec.total:
            return
        if self.cursor >= rec.total - 1:
            self._set_playing(False)
            self.ended = True
            self._draw_missing()
            return
        self.pace.drawn(time.monotonic())
        self.seek(rec.step(self.cursor, self.size_name, 1))

    def _set_playing(self, playing: bool) -> None:
        self.playing = playing
        self.pace.reset()
        if self._timer is not None:
            if playing:
                self._timer.resume()
                self._prefetch()  # the first tick's frame, and those after, ahead
            else:
                self._timer.pause()
        self._draw_transport()

    def action_play(self) -> None:
        rec = self.recording
        if not self.playing and rec is not None and self.cursor >= rec.total - 1:
            self.seek(0)  # playing again from the end starts over
        self._set_playing(not self.playing)

    def action_step(self, delta: int) -> None:
        if self.recording is not None:
            self.seek(self.recording.step(self.cursor, self.size_name, delta))

    def action_jump(self, delta: int) -> None:
        if self.recording is not None:
            self.seek(self.recording.step(self.cursor, "phase", delta))

    def action_seek_end(self, end: int) -> None:
        if self.recording is not None:
            self.seek(self.recording.total - 1 if end else 0)

    def action_cycle_size(self) -> None:
        before = self._detail()
        self.size_name = STEP_SIZES[(STEP_SIZES.index(self.size_name) + 1) % len(STEP_SIZES)]
        if self._detail() != before:
            self._reload()
        self._draw_transport()

    def action_speed(self, delta: int) -> None:
        self.speed = max(0, min(len(SPEEDS) - 1, self.speed + delta))
        if self._timer is not None:
            self._timer.stop()
        self._timer = self.set_interval(1 / SPEEDS[self.speed], self._tick, pause=not self.playing)
        self.pace.reset()
        self._draw_transport()

    def action_cycle_view(self) -> None:
        self._views.cycle()

    def action_neurons_page(self, delta: int) -> None:
        for view in self.query(NeuronsView):
            view.page(delta)

    def action_toggle_light(self) -> None:
        """Open the light group under the cursor into its calls, or close it again."""
        event = self.current_event()
        group = event.group if event else None
        if group is None:
            return
        self.expanded ^= {group}
        self._reload()

    async def action_explore(self) -> None:
        event = self.current_event()
        kinds = ("layer", "grad", "loss", "stage")
        if event and event.kind == "light":
            self.action_toggle_light()
            return
        if not event or event.call is None or event.kind not in kinds:
            return
        pages = [p.id for p in self.app.pages()]
        if "explore" in pages:
            await self.app.action_page(pages.index("explore") + 1)  # builds it on first use
            self.app.goto_call(event.batch, event.call)


def opening_requests(
    run: str, batch: int, sample: int, answer: ReplayAnswer
) -> list[tuple[str, dict[str, Any]]]:
    """What the page asks the agent for as it opens on ``batch`` (method, parameters), from
    the first page of its event list: the cards' sample and the layer stack's thumbnails.
    The app asks them ahead, while the page is built, so the first frame finds them."""
    events = [e for e in answer.events if e.batch == batch]
    if not events or events[0].group is not None:  # a light group shows no sample
        return []
    thumbs = [("thumbs", params) for _, params in thumb_requests(run, batch, sample, events)]
    return [*card_requests(run, batch, sample), *thumbs]


def counted_note(event: ReplayEvent) -> str:
    """What a light group ran but only counted: repeated forwards recorded the first few
    times, and calls past its cap ("" when it recorded everything)."""
    parts = []
    repeats, dropped = event.repeats, event.dropped
    if repeats:
        parts.append(f"{repeats:,} repeated forward{'s' if repeats != 1 else ''}")
    if dropped:
        parts.append(f"{dropped:,} call{'s' if dropped != 1 else ''} past its cap")
    return f" · {' and '.join(parts)} counted, not recorded" if parts else ""
