"""What the viewer's tests share: the app over a real local agent process, waiting for it to
settle, and reading its screen as text. Test files import these by name (``from
viewer_support import make_app``); ``conftest`` only holds fixtures, so any subset of test
files collects."""

from __future__ import annotations

import contextlib
import importlib
import inspect
import io
import pkgutil
import time
from collections.abc import Callable
from pathlib import Path

from rich.console import Console
from textual.dom import DOMNode

import tvis.tui
from tvis.agent.target import Target
from tvis.tui.app import TvisApp
from tvis.tui.command import Dialer

SETTLE_TIMEOUT_S = 20.0
"""Generous: the suite shares two cores with other rooms' tests."""


def make_app(root: Path, image_mode: str = "halfcell", **kwargs) -> TvisApp:
    """The viewer over ``root`` exactly as `tvis tui ROOT` builds it."""
    target = Target(path=str(root))
    dialer = Dialer(target)
    dialer.start()
    return TvisApp(dialer, target.describe(), image_mode, **kwargs)


async def wait_for(
    pilot, predicate: Callable[[], object], what: str, timeout: float = SETTLE_TIMEOUT_S
):
    """Let the app run until ``predicate()`` is truthy; fail with ``what`` otherwise."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = predicate()
        except Exception:
            value = None
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}\n{screen_text(pilot.app)}")
        await pilot.pause(0.02)


@contextlib.contextmanager
def no_quiet_spell(app):
    """What a key did itself, checked with the quiet-spell ticker paused: on a loaded
    machine the key's handling and the pilot's wait can outlast ``QUIET_S``, and the
    spell's catching up would be mistaken for the key's."""
    app.ahead.stop()
    try:
        yield
    finally:
        app.ahead.start()


def count_layouts(screen) -> list[float]:
    """When ``screen`` is laid out from now on (Textual's private ``_refresh_layout``, on
    this screen only): the layouts a key costs, each a pass over every widget."""
    layouts: list[float] = []
    lay_out = screen._refresh_layout

    def recorded(*args, **kwargs):
        layouts.append(time.perf_counter())
        return lay_out(*args, **kwargs)

    screen._refresh_layout = recorded
    return layouts


def count_requests(app) -> list[dict]:
    """Every request the app sends its agent from now on, as ``{"method": …, **params}``
    (``"background": True`` in those sent in the background)."""
    return spy_requests(app.data.client)


def count_requests_from_the_start(app) -> list[dict]:
    """``count_requests`` from the connection on (call it before ``run_test``): what the
    app asks for as it opens the run, before any page is up."""
    asked: list[dict] = []
    connector = app.link.connector

    def connect():
        client = connector()
        spy_requests(client, asked)
        return client

    app.link.connector = connect
    return asked


def spy_requests(client, asked: list[dict] | None = None) -> list[dict]:
    """Every request sent through agent ``client`` from now on, appended to ``asked``."""
    asked = [] if asked is None else asked
    client_call, client_later = client.call, client.call_background
    client.call = lambda method, **params: (
        asked.append({"method": method, **params}),
        client_call(method, **params),
    )[1]
    client.call_background = lambda method, **params: (
        asked.append({"method": method, "background": True, **params}),
        client_later(method, **params),
    )[1]
    return asked


def showing(app, text: str) -> str:
    """The screen as plain text once it shows ``text`` ("" before: for ``wait_for``)."""
    screen = screen_text(app)
    return screen if text in screen else ""


def screen_text(app, styled: bool = False) -> str:
    """The screen as plain text, one line per row (what a user reads); ``styled``, with
    its colours as escape codes."""
    console = Console(
        width=app.size.width,
        height=app.size.height,
        file=io.StringIO(),
        force_terminal=True,
        color_system="truecolor" if styled else None,
        record=True,
        legacy_windows=False,
    )
    console.print(
        app.screen._compositor.render_update(full=True, screen_stack=app._background_screens)
    )
    return console.export_text(styles=styled)


def render_text(renderable, width: int = 120) -> str:
    """A Rich renderable as plain text."""
    console = Console(width=width, file=io.StringIO(), color_system=None, record=True)
    console.print(renderable)
    return console.export_text()


def explore(app):
    return app.explore_page()


async def open_explore(pilot):
    """Wait for the first complete Explore screen: tree roots, a selected call, its cards."""
    app = pilot.app
    await goto_page(pilot, "explore")
    page = await wait_for(pilot, app.explore_page, "the Explore page")
    await wait_for(
        pilot,
        lambda: (
            page.inspector.shown is not None
            and page.inspector.cards
            and all(c.ref for c in page.inspector.cards)
        ),
        "the inspector's tensor cards",
    )
    return page


async def goto_page(pilot, page_id: str) -> None:
    """Switch to page ``page_id`` once the run is open (the app opens on Replay)."""
    app = pilot.app
    ids = await wait_for(
        pilot,
        lambda: app.run_name and app.current_mode != "_default" and [p.id for p in app.pages()],
        "the run's first page",
    )
    if app.current_mode != page_id:
        await app.action_page(ids.index(page_id) + 1)
    await wait_for(pilot, lambda: app.current_mode == page_id, f"the {page_id} page")


def node_named(page, name: str):
    """The loaded tree row of the call named ``name``."""
    for node in page.calls.call_tree.call_nodes():
        if getattr(node.data.call, "name", None) == name:
            return node
    return None


def classes_with_bindings() -> list[type]:
    """Every widget, screen and app class of the viewer that declares key bindings."""
    found = {}
    for module in pkgutil.walk_packages(tvis.tui.__path__, "tvis.tui."):
        loaded = importlib.import_module(module.name)
        for _, cls in inspect.getmembers(loaded, inspect.isclass):
            if issubclass(cls, DOMNode) and cls.__module__.startswith("tvis.tui"):
                if any(
                    "BINDINGS" in vars(c) for c in cls.__mro__ if c.__module__.startswith("tvis")
                ):
                    found[f"{cls.__module__}.{cls.__qualname__}"] = cls
    return list(found.values())
