"""The tvis viewer: connects through the agent client, opens a run, and hosts the pages.

The app holds what every page shares — the open run, the batch (by its recorded index: light
no-grad groups leave gaps), the followed sample and whether heatmaps show values or
gradients — as reactives that pages watch. Pages are app modes (see ``pages``); each gets the
tab bar and the status line.

The connection itself — dialling, the waiting cue, going offline when it drops and
reconnecting — is ``link.Link``'s; the app opens a run once connected and reloads it on the
same batch, sample and selection once reconnected.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any, ClassVar

from textual import events, work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import BindingType
from textual.reactive import var
from textual.screen import Screen
from textual.timer import Timer

from tvis.agent.replies import CallsAnswer, ReplayAnswer, replay_query
from tvis.tui import keys
from tvis.tui.anomaly_start import opening_batch as watched_opening
from tvis.tui.build_ahead import BuildAhead
from tvis.tui.commands import CallCommands, ViewCommands
from tvis.tui.data import Client, Data
from tvis.tui.help import HelpScreen, ids_on_screen
from tvis.tui.hidden_pages import HiddenPages
from tvis.tui.link import Link, grey
from tvis.tui.messages import GotoCall, Selection
from tvis.tui.notice import Notice
from tvis.tui.opening import run_to_open
from tvis.tui.pages import PageSpec, build, imported, pages_for, warm
from tvis.tui.pane import Asks
from tvis.tui.quiet_collect import QuietCollector
from tvis.tui.run_picker import RunPicker
from tvis.tui.widgets.call_tree import CallTree, first_interesting
from tvis.tui.widgets.page_tabs import PageTabs
from tvis.tui.widgets.status_line import StatusLine

PARSED_CSS_KEPT = 1024
"""CSS sources the stylesheet keeps parsed. Textual parses every source again each time a
widget class is mounted for the first time (a first toast, pane, list or page adds its
``DEFAULT_CSS``), from a cache of 64 parsed sources; Textual's widgets and tvis's bring
~70, one round of them evicted the next, and each such mount parsed them all again:
45–70 ms under the key (a pane built at its key: `s` 72 → 40 ms, `y` 64 → 34; a first
notice 97 → 31 ms)."""

LIVE_POLL_S = 1.5
"""How often a run that is still recording is re-read: a new batch shows within 2 s."""


class TvisApp(Asks, App[None]):
    """The terminal viewer."""

    CSS_PATH = "tvis.tcss"
    TITLE = "tvis"
    BINDINGS: ClassVar[list[BindingType]] = [*keys.APP]
    COMMANDS = App.COMMANDS | {CallCommands, ViewCommands}

    run_name: var[str | None] = var(None)
    run_info: var[dict | None] = var(None, always_update=True)
    run_status = var("")
    batch = var(0, always_update=True)
    sample = var(0)
    show_grad = var(False)
    status_note = var("")
    link_wait = var("")  # "waiting for HOST · 3 s" while the agent is silent on a request

    def __init__(
        self,
        connector: Callable[[], Client] | None,
        target_label: str,
        image_mode: str = "halfcell",
        run: str | None = None,
        live_address: str | None = None,
        keymap: dict[str, str] | None = None,
        keymap_error: str | None = None,
    ) -> None:
        super().__init__()
        self.stylesheet._parse_cache.grow(PARSED_CSS_KEPT)  # empty yet: it takes the new size
        self.link = Link(self, connector)
        self.target_label = target_label
        self.image_mode = image_mode
        self.wanted_run = run
        self.live_address = live_address
        self.keymap = keymap or {}
        self.keymap_error = keymap_error
        self.runs: list[dict[str, Any]] = []
        self.run_id: str | None = None
        self.error: str | None = None
        self.page_screens: dict[str, Screen | None] = {}  # page id -> its screen, once built
        self.internal_errors: list[str] = []
        self._poll_timer: Timer | None = None
        self._asked_run: str | None = None  # the run the "run" reply in flight is for
        self._polled_run: str | None = None  # and the run the poll in flight is for
        self.hidden = HiddenPages(self)  # pages off screen catch up only when shown
        self.ahead = BuildAhead(self, self._build_ahead, self._lay_out_ahead)
        # `tvis tui` sets `collects_quietly`: a test's app leaves the collector alone.
        self.collector = QuietCollector(self)
        self.collects_quietly = False
        self._mounted: set[int] = set()  # id() of the page screens mounted whole
        self._page_chosen = False  # whether a page was shown or is on its way
        self._page_wanted: str | None = None  # the page the last page key asked for
        self._laid_out: set[int] = set()  # id() of pages built ahead laid out, not rendered
        # Within action_page's switch_mode: to a page "mounted" whole or a "new" one (then
        # "held" once the switch holds the display); None outside it.
        self._switching: str | None = None

    async def on_event(self, event: events.Event) -> None:
        if isinstance(event, (events.Key, events.MouseEvent, events.Paste)):
            self.ahead.input_seen()  # a user at work: no page is built ahead under a key
        await super().on_event(event)
        if isinstance(event, events.Key):  # the page shown fetches ahead once keys rest
            rested = getattr(self.screen, "key_handled", None)
            if callable(rested):
                rested()

    def notify(self, message: str, *, markup: bool = False, **kwargs: Any) -> None:
        """A notice is a plain sentence: the paths, tokens and agent errors in it are never
        markup (``[/INST]`` raised MarkupError), whatever a widget's ``notify`` passes."""
        super().notify(message, markup=False, **kwargs)

    # -- shared state --------------------------------------------------------------------

    @property
    def data(self) -> Data | None:
        """The open connection to the agent (None until connected)."""
        return self.link.data

    @property
    def offline(self) -> str | None:
        """Why the connection dropped, until reconnected."""
        return self.link.offline

    @property
    def batch_indices(self) -> list[int]:
        """The recorded batch indices, in order; light no-grad groups leave gaps."""
        return [b.get("index") for b in (self.run_info or {}).get("batches") or []]

    def opening_batch(self) -> int:
        """Where a run opens: its first training batch, not an evaluation before training
        (nanoGPT's ``estimate_loss`` at iteration 0), which stays one key back; a watched
        run on its anomaly."""
        watched = watched_opening(self.run_info)
        if watched in self.batch_indices:
            return watched
        batches = (self.run_info or {}).get("batches") or []
        trained = next((b.get("index") for b in batches if not b.get("light")), None)
        if trained is not None:
            return trained
        return self.batch_indices[0] if self.batch_count else 0

    @property
    def batch_count(self) -> int:
        return len(self.batch_indices)

    @property
    def batch_position(self) -> int | None:
        """Where the current batch is in the run's list (None: not recorded yet)."""
        indices = self.batch_indices
        return indices.index(self.batch) if self.batch in indices else None

    @property
    def batch_info(self) -> dict[str, Any] | None:
        position = self.batch_position
        return None if position is None else (self.run_info or {})["batches"][position]

    @property
    def current_step(self) -> int | None:
        info = self.batch_info
        return info.get("step") if info else None

    def pages(self) -> list[PageSpec]:
        ranks = len((self.run_info or {}).get("ranks") or [])
        return pages_for(self.run_name is not None, ranks)

    # -- start ---------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield PageTabs()
        yield Notice(id="notice")
        yield StatusLine()

    def on_mount(self) -> None:
        self.set_keymap(self.keymap)
        if self.keymap_error:
            self.notify(self.keymap_error, severity="warning", timeout=8)
        self._refresh_tabs()
        if self.link.connector is None:
            self.call_later(self.action_page, 1)
        else:
            self._say(f"connecting to {self.target_label} …")
            # While the agent answers: the page a run opens on, then — where the agent is
            # still starting (local), not already connected (ssh, greeted before the app) —
            # the one most first visits go to: a `2` pressed as soon as the tabs show need
            # not import it, and over ssh it would only compete with the first page.
            greeted = getattr(self.link.connector, "first", None) is not None
            warm(*pages_for(True)[: 1 if greeted else 2])
        self.link.start()

    def _say(self, message: str, hint: str = "", error: bool = False) -> None:
        for notice in self.query(Notice):
            notice.say(message, hint, error)

    def not_connected(self, message: str) -> None:
        """Say why the viewer could not connect or open the run; `tvis tui` exits with it."""
        self.error = message
        quits = f"{keys.shown(self, 'app.quit')} quits"
        self._say(f"Could not connect to {self.target_label}", f"{message}\n\n{quits}", error=True)

    def run_to_open(self, runs: list[dict[str, Any]]) -> str | None:
        """The run the viewer opens on connecting: the one asked for, or the only one."""
        return run_to_open(runs, self.wanted_run)

    def connected(self, runs: list[dict[str, Any]], info: dict[str, Any] | None = None) -> None:
        """The link is up (``data``): open the run asked for, the only one, or a picker.
        ``info``: that run's index, when the link already asked for it."""
        self.runs = runs
        if self.data is not None:
            self.target_label = self.data.describe()
        self.status_note = ""
        run = self.run_to_open(runs)
        if run is not None:
            self.open_run(run, info)
        elif self.wanted_run:
            self.not_connected(
                f"there is no run {self.wanted_run!r} under {self.target_label}; "
                "leave out --run to pick one."
            )
        elif runs:
            self._say(
                "pick a run",
                f"{keys.shown(self, 'app.runs')} opens the run picker · "
                f"{keys.shown(self, 'app.quit')} quits",
            )
            self.action_pick_run()
        else:
            self._say(
                f"no runs under {self.target_label} yet",
                f"the Live page still works · {keys.shown(self, 'app.quit')} quits",
            )
            self._refresh_tabs()

    # -- runs ----------------------------------------------------------------------------

    def open_run(self, run: str, info: dict[str, Any] | None = None) -> None:
        self._say(f"opening {run} …")
        if info is None:
            self._load_run(run)
        else:
            self._asked_run = run
            self.answered("run", info)

    def _load_run(self, run: str) -> None:
        self._asked_run = run
        self.cancel("poll")  # a poll of the run shown before must not land on this one
        self.ask("run", tag="run", run=run)

    def answered(self, tag: str, info: dict[str, Any]) -> None:
        if tag == "run" and self._asked_run is not None:
            first_visit = self.run_name is None
            self._run_loaded(self._asked_run, info)
            if first_visit and self.run_status != "running" and self.pages()[0].id == "replay":
                # A thread of its own, not a Textual worker: a worker starts only when the
                # event loop next turns, after the page's build, which may wait hundreds of
                # ms on the warm thread's imports (numpy, the page's modules); the agent
                # meanwhile has nothing to do.
                threading.Thread(
                    target=self._quietly,
                    args=(self._prefetch_replay, self._asked_run, self.sample, self.batch),
                    name="tvis-prefetch-replay",
                    daemon=True,
                ).start()
            if self.batch_count:
                self._prefetch_first_screen(
                    self._asked_run,
                    self.batch,
                    self.sample,
                    self.show_grad,
                    self.size.width,
                )
        elif tag != "run" and self._polled_run is not None:
            self._run_polled(self._polled_run, info)

    def failed(self, tag: str, message: str) -> None:
        if tag == "run":
            self.not_connected(message)

    def _quietly(self, fetch: Callable[..., None], *args: Any) -> None:
        """``fetch(*args)`` on a thread of its own: a prefetch that fails leaves the failure
        to the page's own requests, which say it (a traceback would land on the screen)."""
        try:
            fetch(*args)
        except Exception:
            pass

    def _prefetch_replay(self, run: str, sample: int, batch: int) -> None:
        """Ask for the event list Replay, the first page, opens on (the agent's one long
        answer to it) while the page is being built, then what its first frame of ``batch``
        shows (the sample's pictures, the layers' thumbnails): its own requests then find
        them ready or on their way (``Data`` sends identical requests once). Runs on a
        thread; a failure is left to the page's own requests."""
        data = self.data
        if data is None:
            return
        answer = data.prefetch("replay", **replay_query(run, sample, "layer", []))
        if not isinstance(answer, ReplayAnswer):
            return
        from tvis.tui.pages.replay import opening_requests

        requests = opening_requests(run, batch, sample, answer)
        if self._page_wanted not in (None, "replay"):
            return  # another page's number came first: its requests go alone
        # All at once: the agent answers them on its workers, and over ssh one round trip.
        with ThreadPoolExecutor(max(1, len(requests)), "tvis-prefetch") as pool:
            for method, params in requests:
                pool.submit(partial(data.prefetch, method, **params))

    @work(thread=True, exclusive=True, group="prefetch", exit_on_error=False)
    def _prefetch_first_screen(
        self, run: str, batch: int, sample: int, grad: bool, columns: int
    ) -> None:
        """While the first page mounts, ask for what Explore's first screen shows: the roots
        of ``batch`` and the call the cursor starts on, then that call's card pictures at
        the width its inspector will give them on a terminal ``columns`` wide, and its
        layer view. Explore's own requests then find them ready and
        it draws its cards in its first frame. Then the layers table's first page, on that
        call's row: on a big batch `y` is the key that waits longest for the agent (its
        rows are then drawn in the frame that mounts the table); the agent has just
        opened the batch for the roots."""
        data = self.data
        if data is None:
            return
        page = data.prefetch("calls", **CallTree.page_request(run, batch, -1))
        rows = page.calls if isinstance(page, CallsAnswer) else ()
        if not rows:
            return
        first = rows[first_interesting(rows)]
        call = first.id
        record = data.prefetch("call", run=run, batch=batch, call=call)
        if first.n_children:  # the tree opens it: its children are on the first screen
            data.prefetch("calls", **CallTree.page_request(run, batch, call))
        from tvis.tui.pages.explore_layout import inspector_picture_width

        width = inspector_picture_width(columns)  # None: the tree alone on a narrow one
        if width is not None and isinstance(record, dict):
            from tvis.tui.widgets.inspector_requests import picture_requests
            from tvis.tui.widgets.layer_views import opening_request

            selection = Selection("call", batch=batch, call=call)
            requests = picture_requests(
                record, selection, run, sample, grad, width, opening_request
            )
            # In the background: the first page's own requests go first. All at once: the
            # agent answers them on its workers, and over ssh in one round trip.
            with ThreadPoolExecutor(max(1, len(requests)), "tvis-prefetch") as pool:
                for method, params in requests:
                    pool.submit(partial(data.prefetch_later, method, **params))
        from tvis.tui.widgets.layers_table import SORTABLE, locate_request, page_request

        layers = page_request(run, batch, SORTABLE[0].sort, False, 0)
        data.prefetch_later("layers", **layers)  # a key may never ask for it
        data.prefetch_later("layers", **locate_request(layers, call))

    def _run_loaded(self, run: str, info: dict[str, Any]) -> None:
        first = self.run_name is None
        self.run_id = info.get("run_id") or run.rsplit("/", 1)[-1]
        self.run_status = info.get("status") or ""
        if self.data is not None:
            self.data.live = self.run_status == "running"
        self.sample = 0
        self.run_info = info
        self.run_name = run
        self.batch = self.opening_batch()
        if self.batch_count == 0:
            self.status_note = "waiting for the first batch"
        self._start_polling()
        for spec in self.pages():
            self._add_page(spec)
        self._refresh_tabs()
        if first:
            # After the tab bar is written: the pages' tabs are what a user presses a page's
            # number at, meanwhile. A worker, not a callback: while it waits for the page's
            # module, the app's queue goes on, and a number pressed then is handled then.
            self.call_after_refresh(
                self.run_worker, self._open_first_page(), group="first-page", exit_on_error=False
            )

    async def _open_first_page(self) -> None:
        """The run's first page, unless a page's key pressed at its tabs came first: that
        page is the one shown (it is already on its way), and the first is not built."""
        try:
            await imported(self.pages()[0].module)
            if not self._page_chosen:
                await self.action_page(1)  # which opens nothing once the app is closing
        except Exception as e:  # said, as a reply's fault is (``Asks.on_reply``)
            self.internal_errors.append(f"first page: {type(e).__name__}: {e}")
            self.notify(f"internal error: {type(e).__name__}: {e}", severity="error", timeout=8)

    def stop_polling(self) -> None:
        if self._poll_timer is not None:
            self._poll_timer.stop()
            self._poll_timer = None

    def _start_polling(self) -> None:
        self.stop_polling()
        if self.run_status == "running":
            self._poll_timer = self.set_interval(LIVE_POLL_S, self._poll_run)

    def _poll_run(self) -> None:
        self._polled_run = self.run_name
        self.ask("run", tag="poll", run=self._polled_run)

    def _run_polled(self, run: str, info: dict[str, Any]) -> None:
        if run != self.run_name:
            return
        before = self.batch_count
        position = self.batch_position
        following = position is None or position >= before - 1
        self.run_status = info.get("status") or ""
        if self.data is not None:
            self.data.live = self.run_status == "running"
        self.run_info = info
        after = self.batch_count
        if after > before:
            self.status_note = ""
            if following or before == 0:
                self.batch = self.batch_indices[-1]
        if self.run_status != "running":
            self._start_polling()

    # -- pages ---------------------------------------------------------------------------

    async def action_page(self, n: int) -> None:
        """Show the n-th page of the tab bar."""
        pages = self.pages()
        if not 1 <= n <= len(pages):
            return
        spec = pages[n - 1]
        self._page_chosen = True
        self._page_wanted = spec.id
        if not self.page_built(spec.id):
            # Its module (numpy, the picture kit: the warm thread's, at the start) waited
            # for off the app's loop, which goes on drawing meanwhile (and, while the first
            # page waits in its worker, handling keys).
            await imported(spec.module)
            if self._page_wanted != spec.id:
                return  # another page's number came meanwhile: that page is shown
        if not self.is_running:
            # Closing (a `q` as the run opened): Textual is closing the screens, and a mode
            # switched to now would be a screen stack added under its loop over them.
            return
        self._add_page(spec)
        left_id = self.current_mode
        left = self.page_screens.get(left_id)
        if spec.id != left_id:
            # Before the switch: the page's first frame is of the batch and sample of now.
            self.hidden.show(spec.id)
        mounted = id(self.page_screens.get(spec.id)) in self._mounted
        self._switching = "mounted" if mounted else "new"
        try:
            shown = self.switch_mode(spec.id)
        finally:
            held, self._switching = self._switching == "held", None
        try:
            await shown
        finally:
            if held:
                self._end_batch()
                if not self._batch_count:
                    self.screen.refresh()
        if self.current_mode == spec.id:  # not left meanwhile (a key during a first build)
            self.ahead.visited(spec.id)
        if left is not None and left is not self.screen:
            # It catches up in the next quiet spell, or before its frame when shown again.
            self.ahead.hold(left_id, left)
        self._mounted.add(id(self.screen))
        self._refresh_tabs()
        if self.offline is not None:
            grey(self.screen, True)
        if self.run_name is not None:
            self.ahead.start()
        if self.collects_quietly:
            self.collector.start()  # full collections in quiet spells, not under keys

    def delay_update(self, delay: float = 0.05) -> None:
        # Textual's switch_mode holds every repaint for 50 ms to mask a screen composing.
        # A page mounted whole (built ahead, or visited) has nothing to mask: the hold only
        # put its first frame 50 ms after the key. A page built by the switch is held until
        # it has mounted (``action_page``): mounted in 20–30 ms, it was drawn at 50.
        if self._switching == "new":
            self._begin_batch()
            self._switching = "held"
        elif self._switching is None:
            super().delay_update(delay)

    @property
    def switching_page(self) -> bool:
        """Whether a page key's ``switch_mode`` is under way (see ``Page._screen_resized``)."""
        return self._switching is not None

    def page_built(self, page_id: str) -> bool:
        """Whether the page's screen exists (visited, or built ahead)."""
        return page_id in self._screen_stacks

    def _build_ahead(self, spec: PageSpec) -> None:
        """Build ``spec``'s page hidden, as ``switch_mode`` would on its first visit, less
        the resume (the visit sends it): it composes, styles itself and asks the agent for
        what it shows now, and its first visit is only a switch."""
        self._add_page(spec)
        if self.page_built(spec.id):
            return
        page = self._build_page(spec)
        self.ahead.hold(spec.id, page)
        screen, mounted = self._get_screen(page)
        self._load_screen_css(screen)
        screen._screen_resized(self.size)
        self._screen_stacks[spec.id] = [screen]
        self.run_worker(self._note_mounted(screen, mounted), group="build-ahead")

    def _lay_out_ahead(self, page_id: str) -> bool:
        """Arrange a page built ahead at the terminal's size, then (at the next call) render
        its lines, hidden: its visit then draws what is already laid out and rendered. False
        while the page is still mounting or only laid out (to be called again)."""
        screen = self.page_screens.get(page_id)
        if screen is None or screen is self.screen:
            self._laid_out.discard(id(screen))
            return True  # gone, or shown already: laid out as any page on screen is
        if not screen.is_attached or id(screen) not in self._mounted:
            return False
        if id(screen) not in self._laid_out:
            # Two slices of quiet, not one: a key that comes between waits for neither.
            screen._refresh_layout(self.size)
            self._laid_out.add(id(screen))
            return False
        self._laid_out.discard(id(screen))
        if screen._layout_required:
            # The first layout's resize events changed what some widgets show (and a
            # hidden screen's update timer never lays it out): laid out again here, not
            # under its first visit's key, as a screen on show is.
            screen._refresh_layout(self.size)
            screen._layout_required = False
        screen._compositor.render_update(full=True)
        return True

    async def _note_mounted(self, screen: Screen, mounted: Any) -> None:
        await mounted
        self._mounted.add(id(screen))

    def _add_page(self, spec: PageSpec) -> None:
        if spec.id not in self.page_screens:
            self.page_screens[spec.id] = None
            self.add_mode(spec.id, partial(self._build_page, spec))

    def _build_page(self, spec: PageSpec) -> Screen:
        screen = self.page_screens[spec.id] = build(spec, self)
        # Its widgets are styled from the current stylesheet as they register. Textual takes
        # a screen that was never shown for stale and, on the switch to it, re-parses every
        # CSS source and restyles every widget of every page (a tenth of a first visit).
        screen._css_update_count = self._css_update_count
        # The tab bar and the status line are composed with the page: mounted after its
        # switch, they moved every widget a row down in a second layout, and a full render.
        pages = self.pages()
        current = next((i for i, p in enumerate(pages) if p.id == spec.id), None)
        screen.compose_add_child(PageTabs([p.title for p in pages], current))
        screen.compose_add_child(StatusLine())
        return screen

    def _refresh_tabs(self) -> None:
        pages = self.pages()
        current = next((i for i, p in enumerate(pages) if p.id == self.current_mode), None)
        for tabs in self.screen.query(PageTabs):
            tabs.show([p.title for p in pages], current)

    def explore_page(self):
        """The Explore page once it exists (the palette and tests reach it through this)."""
        from tvis.tui.pages.explore import ExplorePage

        page = self.page_screens.get("explore")
        return page if isinstance(page, ExplorePage) else None

    # -- actions -------------------------------------------------------------------------

    def help_ahead(self) -> bool:
        """One slice of the help made ahead in a quiet spell: mounted hidden, then laid out,
        then one section drawn at a time (``HelpScreen.draw_ahead``), so that no `?` draws
        its ~170 lines (55 ms). False once it is all done."""
        if not self.is_screen_installed("help"):
            self.install_screen(HelpScreen(), "help")
            screen, mounted = self._get_screen("help")
            self._load_screen_css(screen)
            screen._screen_resized(self.size)
            self.run_worker(self._note_mounted(screen, mounted), group="build-ahead")
            return True
        help = self.get_screen("help")
        if not isinstance(help, HelpScreen) or help in self.screen_stack:
            return False  # shown: drawn as it shows
        if id(help) not in self._mounted:
            return help.is_attached  # still mounting (or gone)
        table = help.query_one("#help-table")
        if help.size != self.size or not table.content_region.width:
            help._refresh_layout(self.size)
            return bool(table.content_region.width)
        return help.draw_ahead() or help.arrange_ahead(ids_on_screen(self.screen))

    def action_help(self) -> None:
        if isinstance(self.screen, HelpScreen):
            return
        if not self.is_screen_installed("help"):  # built once, shown again on each `?`
            self.install_screen(HelpScreen(), "help")
        help = self.get_screen("help")
        assert isinstance(help, HelpScreen)
        self.push_screen(help.show(ids_on_screen(self.screen)))

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        """Textual's own commands, labelled as such so they stand apart from tvis's."""
        for command in super().get_system_commands(screen):
            yield SystemCommand(f"Textual: {command.title}", command.help, command.callback)

    def action_pick_run(self) -> None:
        if self.data is None:
            return
        self.push_screen(RunPicker(self.runs, self.run_name), self._picked)

    def _picked(self, run: str | None) -> None:
        if run is not None and run != self.run_name:
            self.open_run(run)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return not self.link.refuses(action)

    def action_toggle_grad(self) -> None:
        self.show_grad = not self.show_grad

    def action_sample(self, delta: int) -> None:
        size = (self.batch_info or {}).get("batch_size") or 1
        self.sample = (self.sample + delta) % max(1, size)

    def action_batch(self, delta: int) -> None:
        """Move ``delta`` batches along the recorded ones (skipping the gaps between indices)."""
        indices = self.batch_indices
        if not indices:
            return
        position = self.batch_position
        position = 0 if position is None else max(0, min(position + delta, len(indices) - 1))
        self.set_batch(indices[position])

    def action_rank(self, delta: int) -> None:
        """Open the previous / next rank of a multi-process recording, on the same page."""
        names = [r["run"] for r in (self.run_info or {}).get("ranks") or []]
        if self.run_name in names and len(names) > 1:
            self.open_run(names[(names.index(self.run_name) + delta) % len(names)])

    def set_batch(self, index: int) -> None:
        """Show the batch recorded with ``index`` (the nearest recorded one if it has none)."""
        indices = self.batch_indices
        if not indices:
            return
        if index not in indices:
            index = min(indices, key=lambda i: (abs(i - index), i))
        if index != self.batch:
            self.batch = index

    def goto_call(self, batch: int, call: int, path: list[int] | None = None) -> None:
        page = self.explore_page()
        if page is None:
            return
        pages = [p.id for p in self.pages()]
        if self.current_mode != "explore" and "explore" in pages:
            self.call_later(self.action_page, pages.index("explore") + 1)
        if not page.reveal_now(batch, call):  # held: the switch's first frame shows it
            page.post_message(GotoCall(call, batch=batch, path=path))

    def toggle_explore_mode(self) -> None:
        page = self.explore_page()
        if page is not None:
            page.action_toggle_mode()

    # -- connection --------------------------------------------------------------------

    def connection_lost(self, message: str) -> None:
        """The client or a page saw the connection drop: go offline."""
        self.link.lost(message)

    def action_reconnect(self) -> None:
        self.link.reconnect()

    def reconnected(self, runs: list[dict[str, Any]], info: dict | None) -> None:
        """Back online (``data`` is the new connection) on the same run, batch, sample and
        selection: every page reloads what it shows from the new connection."""
        self.runs = runs
        if info is not None:
            self.run_status = info.get("status") or ""
            if self.data is not None:
                self.data.live = self.run_status == "running"
            self.run_info = info
            self._start_polling()
            self.batch = self.batch  # always_update: every page reloads this batch

    async def action_quit(self) -> None:
        if self.offline is not None:
            self.exit(return_code=0, message=f"tvis: {self.offline}")
            return
        self.exit(return_code=1 if self.error else 0)

    def on_unmount(self) -> None:
        self.collector.stop()
        self.link.close()
