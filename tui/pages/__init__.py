"""The pages of the viewer, in the order a training step happens.

A page is a Textual ``Screen`` installed as an app mode; number keys jump to the n-th page
of the tab bar, which lists only the pages that apply to what is open (pages needing a
recording wait for a run; Live needs none). A new page is one entry in ``PAGES``.
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import importlib.util
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from textual.screen import Screen

if TYPE_CHECKING:
    from tvis.tui.app import TvisApp


@dataclass(frozen=True)
class PageSpec:
    """A page: its mode id, tab title, whether it needs an open run, and its builder;
    ``needs_ranks``: only for a run that is one rank of a multi-process recording."""

    id: str
    title: str
    needs_run: bool
    build: Callable[[TvisApp], Screen]
    module: str
    needs_ranks: bool = False

    def exists(self) -> bool:
        return _installed(self.module)


@functools.cache
def _installed(module: str) -> bool:
    """Whether the page's module is installed: looked up once per process. The tab bar asks
    at every refresh, a dozen times on the way to the first screen, and each lookup of a
    page not imported yet searches the import path again (≈ 0.1 ms per page each time)."""
    return importlib.util.find_spec(module) is not None


def _replay(app: TvisApp) -> Screen:
    from tvis.tui.pages.replay import ReplayPage

    return ReplayPage()


def _explore(app: TvisApp) -> Screen:
    from tvis.tui.pages.explore import ExplorePage

    return ExplorePage()


def _loss(app: TvisApp) -> Screen:
    from tvis.tui.pages.loss import LossPage

    return LossPage()


def _weights(app: TvisApp) -> Screen:
    from tvis.tui.pages.weights import WeightsPage

    return WeightsPage()


def _insights(app: TvisApp) -> Screen:
    from tvis.tui.pages.insights import InsightsPage

    return InsightsPage()


def _live(app: TvisApp) -> Screen:
    from tvis.live.address import resolve
    from tvis.tui.pages.live import LivePage

    # No --live address: the one catches go to by default ($TVIS_SERVER, else 127.0.0.1:2875),
    # bound only when the user asks; --live binds at once.
    return LivePage(resolve(app.live_address), listen=app.live_address is not None)


def _ranks(app: TvisApp) -> Screen:
    from tvis.tui.pages.ranks import RanksPage

    return RanksPage()


PAGES = [
    PageSpec("replay", "Replay", True, _replay, "tvis.tui.pages.replay"),
    PageSpec("explore", "Explore", True, _explore, "tvis.tui.pages.explore"),
    PageSpec("loss", "Loss", True, _loss, "tvis.tui.pages.loss"),
    PageSpec("weights", "Weights", True, _weights, "tvis.tui.pages.weights"),
    PageSpec("insights", "Insights", True, _insights, "tvis.tui.pages.insights"),
    PageSpec("ranks", "Ranks", True, _ranks, "tvis.tui.pages.ranks", needs_ranks=True),
    PageSpec("live", "Live", False, _live, "tvis.tui.pages.live"),
]


class BrokenPage(Screen):
    """What a page that failed to build shows instead: the sentence, not a traceback."""

    def __init__(self, title: str, error: Exception) -> None:
        super().__init__()
        self.message = f"the {title} page could not open: {type(error).__name__}: {error}"

    def compose(self):
        from tvis.tui.notice import Notice

        notice = Notice()
        from tvis.tui import keys

        quits = keys.shown(self.app, "app.quit")
        notice.say(self.message, f"1 … 9 switch pages · {quits} quits", error=True)
        yield notice


def build(spec: PageSpec, app: TvisApp) -> Screen:
    """The page's screen, or a ``BrokenPage`` saying why it could not be built."""
    try:
        return spec.build(app)
    except Exception as e:
        app.internal_errors.append(f"page {spec.id}: {type(e).__name__}: {e}")
        return BrokenPage(spec.title, e)


async def imported(module: str) -> None:
    """``module`` imported, waited for on a thread: the app's loop goes on meanwhile. An
    import begun by ``warm`` is waited for (Python's import lock), not begun again; a
    failure is left to the page's own build, which says it."""
    found = sys.modules.get(module)
    spec = getattr(found, "__spec__", None)
    if found is not None and not getattr(spec, "_initializing", False):
        return  # imported whole already (importlib marks a module still executing)
    try:
        await asyncio.to_thread(importlib.import_module, module)
    except Exception:
        pass


def warm(*specs: PageSpec) -> threading.Thread:
    """Import each of ``specs``' pages in turn (numpy, the picture kit, their widgets:
    0.1–0.2 s for the first) on a thread of its own while the link connects, when the app's
    thread waits for the agent: their first visits then find the modules loaded. A failure
    is left to the page's own build, which says it."""

    def load() -> None:
        for spec in specs:
            try:
                importlib.import_module(spec.module)
            except Exception:
                pass

    name = "-".join(spec.id for spec in specs)
    thread = threading.Thread(target=load, name=f"tvis-import-{name}", daemon=True)
    thread.start()
    return thread


def pages_for(has_run: bool, ranks: int = 1) -> list[PageSpec]:
    """The pages the tab bar lists: those that exist and apply (``ranks``: how many ranks
    the open run's recording holds)."""
    return [
        p
        for p in PAGES
        if p.exists() and (has_run or not p.needs_run) and (ranks > 1 or not p.needs_ranks)
    ]
