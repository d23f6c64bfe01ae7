"""What every Insights view asks the agent about: the open run, the batch by its recorded
index, and the followed sample; and how a token is written so it can be seen."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tvis.tui.app import TvisApp

VISIBLE = {" ": "␣", "\n": "⏎", "\t": "⇥", "": "∅"}


def where(app: TvisApp) -> dict[str, Any] | None:
    """``{run, batch}`` for the batch on screen (its recorded index), or None before a run."""
    run = getattr(app, "run_name", None)
    info = getattr(app, "batch_info", None)
    if run is None or not info or not isinstance(info.get("index"), int):
        return None
    return {"run": run, "batch": info["index"]}


def shown_token(token: str) -> str:
    """A token as drawn on an axis: spaces, newlines and tabs made visible."""
    return VISIBLE.get(token, token.replace("\n", "⏎"))


def follow(app: TvisApp, batch: int, sample: int) -> None:
    """Make the app follow ``sample`` of the batch recorded as ``batch`` (every page does)."""
    if batch not in app.batch_indices:
        return
    if batch != app.batch:
        app.set_batch(batch)
    app.sample = sample
