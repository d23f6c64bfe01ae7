"""The tvis viewer: connects through the agent client, opens a run, and hosts the pages.

The app holds what every page shares — the open run, the batch, the followed sample and
whether heatmaps show values or gradients — as reactives that pages watch. Pages are app
modes (see ``pages``); each gets the tab bar and the status line.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from textual import work
from textual.app import App, ComposeResult
from textual.reactive import var
from textual.screen import Screen

from tvis.agent.protocol import AgentError
from tvis.tui import keys
from tvis.tui.commands import CallCommands, ViewCommands
from tvis.tui.data import Client, Data
from tvis.tui.fetch import fetch
from tvis.tui.help import HelpScreen
from tvis.tui.messages import GotoCall
from tvis.tui.notice import Notice
from tvis.tui.pages import PageSpec, build, pages_for
from tvis.tui.run_picker import RunPicker
from tvis.tui.widgets.call_tree import PAGE as TREE_PAGE
from tvis.tui.widgets.call_tree import first_interesting
from tvis.tui.widgets.page_tabs import PageTabs
from tvis.tui.widgets.status_line import StatusLine

LIVE_POLL_S = 1.5
"""How often a run that is still recording is re-read: a new batch shows within 2 s."""


def sentence(error: BaseException) -> str:
    """What went wrong, as the one sentence the agent or client gave."""
    if isinstance(error, AgentError):
        return error.message
    return str(error) or type(error).__name__


class TvisApp(App[None]):
    """The terminal viewer."""

    CSS_PATH = "tvis.tcss"
    TITLE = "tvis"
    BINDINGS = keys.APP
    COMMANDS = App.COMMANDS | {CallCommands, ViewCommands}

    run_name: var[str | None] = var(None)
    run_info: var[dict | None] = var(None, always_update=True)
    run_status = var("")
    batch = var(0, always_update=True)
    sample = var(0)
    show_grad = var(False)
    status_note = var("")

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
        self.connector = connector
        self.target_label = target_label
        self.image_mode = image_mode
        self.wanted_run = run
        self.live_address = live_address
        self.keymap = keymap or {}
        self.keymap_error = keymap_error
        self.data: Data | None = None
        self.runs: list[dict[str, Any]] = []
        self.run_id: str | None = None
        self.error: str | None = None
        self.internal_errors: list[str] = []
        self._poll_timer = None

    # -- shared state --------------------------------------------------------------------

    @property
    def batch_count(self) -> int:
        return len((self.run_info or {}).get("batches") or [])

    @property
    def batch_info(self) -> dict[str, Any] | None:
        batches = (self.run_info or {}).get("batches") or []
        return batches[self.batch] if 0 <= self.batch < len(batches) else None

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
        if self.connector is None:
            self.call_later(self.action_page, 1)
            return
        self._say(f"connecting to {self.target_label} …")
        self._connect()

    def _say(self, message: str, hint: str = "", error: bool = False) -> None:
        for notice in self.query(Notice):
            notice.say(message, hint, error)

    @work(thread=True, exclusive=True, group="connect", exit_on_error=False)
    def _connect(self) -> None:
        try:
            client = self.connector()
            data = Data(client)
            runs = data.call("runs")
        except Exception as e:
            self.call_from_thread(self._failed, sentence(e))
            return
        self.call_from_thread(self._connected, data, runs)

    def _failed(self, message: str) -> None:
        self.error = message
        self._say(f"Could not connect to {self.target_label}", f"{message}\n\nq quits", error=True)

    def _connected(self, data: Data, runs: list[dict[str, Any]]) -> None:
        self.data = data
        self.runs = runs
        self.target_label = data.describe()
        self.status_note = ""
        if self.wanted_run:
            match = next(
                (r for r in runs if self.wanted_run in (r.get("run"), r.get("run_id"))), None
            )
            if match is None:
                self._failed(
                    f"there is no run {self.wanted_run!r} under {self.target_label}; "
                    "leave out --run to pick one."
                )
                return
            self.open_run(match["run"])
        elif len(runs) == 1:
            self.open_run(runs[0]["run"])
        elif runs:
            self._say("pick a run", "r opens the run picker · q quits")
            self.action_pick_run()
        else:
            self._say(
                f"no runs under {self.target_label} yet", "the Live page still works · q quits"
            )
            self._refresh_tabs()

    # -- runs ----------------------------------------------------------------------------

    def open_run(self, run: str) -> None:
        self._say(f"opening {run} …")
        self._load_run(run)

    @work(thread=True, exclusive=True, group="run", exit_on_error=False)
    def _load_run(self, run: str) -> None:
        fetch(
            self,
            lambda info: self._run_loaded(run, info),
            "run",
            on_error=lambda m: self._failed(m),
            run=run,
        )
        # While the page mounts, ask for what its first screen shows: the roots of batch 0
        # and the call the cursor starts on. The page's own requests then find them ready.
        if self.run_name == run and self.batch_count:
            page = self.data.prefetch(
                "calls", run=run, batch=0, parent=-1, offset=0, limit=TREE_PAGE
            )
            rows = (page or {}).get("calls") or []
            if rows:
                self.data.prefetch(
                    "call", run=run, batch=0, call=rows[first_interesting(rows)]["id"]
                )

    def _run_loaded(self, run: str, info: dict[str, Any]) -> None:
        first = self.run_name is None
        self.run_id = info.get("run_id") or run.rsplit("/", 1)[-1]
        self.run_status = info.get("status") or ""
        self.data.live = self.run_status == "running"
        self.sample = 0
        self.run_info = info
        self.run_name = run
        self.batch = 0
        if self.batch_count == 0:
            self.status_note = "waiting for the first batch"
        self._start_polling()
        for spec in self.pages():
            if spec.id not in self._modes:
                self.add_mode(spec.id, lambda spec=spec: build(spec, self))
        self._refresh_tabs()
        if first:
            self.call_later(self.action_page, 1)

    def _start_polling(self) -> None:
        if self._poll_timer is not None:
            self._poll_timer.stop()
            self._poll_timer = None
        if self.run_status == "running":
            self._poll_timer = self.set_interval(LIVE_POLL_S, self._poll_run)

    @work(thread=True, exclusive=True, group="poll", exit_on_error=False)
    def _poll_run(self) -> None:
        run = self.run_name
        fetch(self, lambda info: self._run_polled(run, info), "run", run=run)

    def _run_polled(self, run: str, info: dict[str, Any]) -> None:
        if run != self.run_name:
            return
        before = self.batch_count
        following = self.batch >= before - 1
        self.run_status = info.get("status") or ""
        self.data.live = self.run_status == "running"
        self.run_info = info
        after = self.batch_count
        if after > before:
            self.status_note = ""
            if following or before == 0:
                self.batch = after - 1
        if self.run_status != "running":
            self._start_polling()

    # -- pages ---------------------------------------------------------------------------

    async def action_page(self, n: int) -> None:
        """Show the n-th page of the tab bar."""
        pages = self.pages()
        if not 1 <= n <= len(pages):
            return
        spec = pages[n - 1]
        if spec.id not in self._modes:
            self.add_mode(spec.id, lambda spec=spec: build(spec, self))
        await self.switch_mode(spec.id)
        await self._decorate(self.screen)
        self._refresh_tabs()

    async def _decorate(self, screen: Screen) -> None:
        if not screen.query(PageTabs):
            await screen.mount(PageTabs(), StatusLine())

    def _refresh_tabs(self) -> None:
        pages = self.pages()
        current = next((i for i, p in enumerate(pages) if p.id == self.current_mode), None)
        for tabs in self.screen.query(PageTabs):
            tabs.show([p.title for p in pages], current, "? keys · ctrl+p palette")

    def explore_page(self):
        """The Explore page once it exists (the palette and tests reach it through this)."""
        from tvis.tui.pages.explore import ExplorePage

        stack = self._screen_stacks.get("explore") or []
        return next((s for s in stack if isinstance(s, ExplorePage)), None)

    # -- actions -------------------------------------------------------------------------

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def action_pick_run(self) -> None:
        if self.data is None:
            return
        self.push_screen(RunPicker(self.runs, self.run_name), self._picked)

    def _picked(self, run: str | None) -> None:
        if run is not None and run != self.run_name:
            self.open_run(run)

    def action_toggle_grad(self) -> None:
        self.show_grad = not self.show_grad

    def action_sample(self, delta: int) -> None:
        size = (self.batch_info or {}).get("batch_size") or 1
        self.sample = (self.sample + delta) % max(1, size)

    def action_batch(self, delta: int) -> None:
        self.set_batch(self.batch + delta)

    def action_rank(self, delta: int) -> None:
        """Open the previous / next rank of a multi-process recording, on the same page."""
        names = [r["run"] for r in (self.run_info or {}).get("ranks") or []]
        if self.run_name in names and len(names) > 1:
            self.open_run(names[(names.index(self.run_name) + delta) % len(names)])

    def set_batch(self, index: int) -> None:
        index = max(0, min(index, self.batch_count - 1))
        if index != self.batch:
            self.batch = index

    def goto_call(self, batch: int, call: int, path: list[int] | None = None) -> None:
        page = self.explore_page()
        if page is None:
            return
        pages = [p.id for p in self.pages()]
        if self.current_mode != "explore" and "explore" in pages:
            self.call_later(self.action_page, pages.index("explore") + 1)
        page.post_message(GotoCall(call, batch=batch, path=path))

    def toggle_explore_mode(self) -> None:
        page = self.explore_page()
        if page is not None:
            page.action_toggle_mode()

    def connection_lost(self, message: str) -> None:
        if self.error is None:
            self.error = message
            self.status_note = "connection lost"
            self.notify(message, severity="error", timeout=30)

    def action_quit(self) -> None:
        self.exit(return_code=1 if self.error else 0)

    def on_unmount(self) -> None:
        if self.data is not None:
            self.data.close()
