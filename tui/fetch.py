"""Agent calls made from Textual thread workers.

The worker blocks on the agent, never the UI: the answer is handed to the UI thread, a
worker that was superseded meanwhile (``exclusive`` groups) drops its answer, and a failure
becomes one sentence for the pane that asked.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from textual.widget import Widget
from textual.worker import get_current_worker

from tvis.agent.protocol import AgentError, ConnectionLost


def fetch(
    widget: Widget,
    apply: Callable[[Any], None],
    method: str,
    on_error: Callable[[str], None] | None = None,
    **params: Any,
) -> None:
    """Call ``method`` on the agent and run ``apply(result)`` on the UI thread.

    Must run inside a thread worker. ``on_error`` receives the agent's sentence when the
    request fails; a lost connection is reported to the app instead.
    """
    worker = get_current_worker()
    app = widget.app
    try:
        result = app.data.call(method, **params)
    except ConnectionLost as e:
        _on_ui(worker, app, app.connection_lost, e.message)
        return
    except AgentError as e:
        if on_error is not None:
            _on_ui(worker, app, on_error, e.message)
        return
    except Exception as e:  # a fault in the client or the viewer: say so, keep the UI alive
        app.internal_errors.append(f"{method}: {type(e).__name__}: {e}")
        if on_error is not None:
            _on_ui(worker, app, on_error, f"{method} failed: {type(e).__name__}: {e}")
        return
    _on_ui(worker, app, apply, result)


def _on_ui(worker, app, fn: Callable[[Any], None], value: Any) -> None:
    if worker.is_cancelled or not app.is_running:
        return
    if getattr(app, "offline", None) and fn != app.connection_lost:
        return  # offline the page stays as it was; reconnecting asks again
    try:
        app.call_from_thread(guarded, app, fn, value)
    except RuntimeError:
        pass  # the app closed while the answer was on its way


def guarded(app, fn: Callable[[Any], None], value: Any) -> None:
    """Run ``fn(value)``; a fault in it is logged and listed, and the UI keeps going."""
    try:
        fn(value)
    except Exception as e:
        app.internal_errors.append(f"{getattr(fn, '__qualname__', fn)}: {type(e).__name__}: {e}")
        app.log.error(app.internal_errors[-1])
        app.notify(f"internal error: {type(e).__name__}: {e}", severity="error", timeout=8)
