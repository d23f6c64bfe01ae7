"""The command palette (ctrl+p): jump to a call by name, switch run, batch, step or page,
toggle value/gradient and batch/step mode. Themes come from Textual's own commands."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, cast

from textual.command import DiscoveryHit, Hit, Hits, Provider

from tvis.agent.replies import CallRowView
from tvis.tui import fmt

if TYPE_CHECKING:
    from tvis.tui.app import TvisApp

FIND_LIMIT = 30
"""Calls offered per query: a palette shows about a dozen, the rest are for scrolling."""


class CallCommands(Provider):
    """Calls of the current batch whose name or class contains what was typed."""

    async def search(self, query: str) -> Hits:
        app = cast("TvisApp", self.app)
        query = query.strip()
        if not app.run_name or app.data is None or len(query) < 2:
            return
        try:
            rows: tuple[CallRowView, ...] = await asyncio.to_thread(
                app.data.call,
                "find",
                run=app.run_name,
                batch=app.batch,
                query=query,
                limit=FIND_LIMIT,
            )
        except Exception:
            return
        matcher = self.matcher(query)
        for row in rows:
            label = f"go to {row.label}" + (f" ({row.cls})" if row.cls and row.name else "")
            score = matcher.match(label) or 0.1
            yield Hit(
                score,
                matcher.highlight(label),
                partial(
                    app.goto_call,
                    app.batch,
                    row.id,
                    list(row.path) if row.path is not None else None,
                ),
                help=f"{row.kind} · {fmt.shape(row.out_shape)}",
            )


class ViewCommands(Provider):
    """Everything that changes what is shown, as named commands."""

    def _commands(self) -> list[tuple[str, Callable[[], object], str]]:
        app = cast("TvisApp", self.app)
        commands: list[tuple[str, Callable[[], object], str]] = []
        if app.offline is not None:
            commands.append(("reconnect", app.action_reconnect, app.offline))
        commands += [
            (
                "toggle value / gradient",
                app.action_toggle_grad,
                "heatmaps show dL/d(tensor) or values",
            ),
            ("open another run", app.action_pick_run, "the run picker"),
            ("show keys", app.action_help, "every key binding"),
        ]
        for i, spec in enumerate(app.pages()):
            commands.append(
                (f"page: {spec.title}", partial(app.action_page, i + 1), f"key {i + 1}")
            )
        info = app.run_info or {}
        for b in info.get("batches") or []:
            commands.append(
                (
                    f"batch {b.get('index')}",
                    partial(app.set_batch, b.get("index")),
                    f"step {b.get('step')} · loss {fmt.num(b.get('loss'))}",
                )
            )
        for s in info.get("steps") or []:
            batches = s.get("batches") or []
            if batches:
                commands.append(
                    (
                        f"step {s.get('index')}",
                        partial(app.set_batch, batches[0]),
                        f"batches {', '.join(map(str, batches))}",
                    )
                )
        page = app.explore_page()
        if page is not None:
            commands.append(
                ("toggle batch / step mode", app.toggle_explore_mode, "the call tree's roots")
            )
            if page.inspector.cards:
                commands += [
                    (
                        "copy Python to fetch this",
                        page.inspector.action_copy_python,
                        "tvis.connect lines for the tensor under the cursor",
                    ),
                    (
                        "export this tensor",
                        page.inspector.action_export,
                        "save it to .npy (and .pt) in ./tvis_exports",
                    ),
                ]
        return commands

    async def discover(self) -> Hits:
        for text, callback, help_text in self._commands()[:8]:
            yield DiscoveryHit(text, callback, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for text, callback, help_text in self._commands():
            score = matcher.match(text)
            if score > 0:
                yield Hit(score, matcher.highlight(text), callback, help=help_text)
