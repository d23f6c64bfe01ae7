"""``Asks`` / ``AgentPane``: the one way a widget, screen or page asks the agent.

A pane asks with ``self.ask(method, tag=..., **params)``. The request runs in a thread
worker, one exclusive group per pane and tag, so a newer question cancels an older one; a
reply that arrives after a newer request was made is dropped; the answer comes back to the
UI thread as a message and lands in ``answered(tag, result)``, or a failure in
``failed(tag, message)`` as the agent's one sentence. A lost connection goes to the app,
which says so once. Workers read nothing from the DOM: everything they need is in the
request's parameters. ``prefetch_all`` warms the client's cache, from a worker, with what
the next key will show (a list's or a cursor's neighbours), so that the key draws at once.
"""

from __future__ import annotations

from itertools import count
from typing import TYPE_CHECKING, Any

from textual.message import Message
from textual.widget import Widget
from textual.worker import get_current_worker

from tvis.agent.protocol import AgentError, ConnectionLost

if TYPE_CHECKING:
    from textual import getters
    from textual.dom import DOMNode

    from tvis.tui.app import TvisApp

    _Node = DOMNode  # what Asks is always mixed into (a Widget, Screen or App)
else:
    _Node = object


class Reply(Message):
    """An agent reply (or its failure) for the pane that asked."""

    def __init__(self, tag: str, generation: int, result: Any = None, error: str | None = None):
        super().__init__()
        self.tag = tag
        self.generation = generation
        self.result = result
        self.error = error


class Asks(_Node):
    """Mixed into a Widget or Screen whose content comes from the agent."""

    _generations = count(1)

    if TYPE_CHECKING:
        app = getters.app(TvisApp)  # tvis's app: its run, batch, sample and client

    @property
    def _wanted_replies(self) -> dict[str, int]:
        """The newest request's generation, per tag (made on first use: no __init__ needed)."""
        return self.__dict__.setdefault("_wanted_reply_generations", {})

    # -- for subclasses -----------------------------------------------------------------

    def ask(self, method: str, tag: str = "main", **params: Any) -> bool:
        """Ask the agent; the answer arrives in ``answered`` unless a newer ask overtakes it.
        An answer already in the client's cache is given at once, before ``ask`` returns
        True (so a caller shows "loading" only when False: a placeholder drawn and replaced
        in one frame still costs a layout)."""
        data = getattr(self.app, "data", None)
        if data is None:
            self.failed(tag, "not connected to an agent yet.")
            return True
        generation = next(self._generations)
        self._wanted_replies[tag] = generation
        cached, result = data.peek(method, **params)
        if cached:  # prefetched or seen before: drawn now, in this frame, with no thread hop
            self.on_reply(Reply(tag, generation, result=result))
            return True
        self.run_worker(
            lambda: self._call(data, tag, generation, method, params),
            group=f"{id(self)}:{tag}",
            exclusive=True,
            thread=True,
            exit_on_error=False,
        )
        return False

    def answered(self, tag: str, result: Any) -> None:
        """Show ``result`` (runs on the UI thread)."""

    def failed(self, tag: str, message: str) -> None:
        """Say what went wrong (runs on the UI thread); the default shows a notification."""
        self.app.notify(message, severity="error", timeout=6)

    def cancel(self, tag: str = "main") -> None:
        """Forget the request in flight for ``tag``: its reply will be dropped."""
        self._wanted_replies[tag] = next(self._generations)

    # -- plumbing -------------------------------------------------------------------------

    def _call(self, data, tag: str, generation: int, method: str, params: dict) -> None:
        try:
            reply = Reply(tag, generation, result=data.call(method, **params))
        except ConnectionLost as e:
            app = self.app
            app.call_from_thread(app.connection_lost, e.message)
            return
        except AgentError as e:
            reply = Reply(tag, generation, error=e.message)
        except Exception as e:  # a fault in the client or the viewer: say so, keep going
            self.app.internal_errors.append(f"{method}: {type(e).__name__}: {e}")
            reply = Reply(tag, generation, error=f"{method} failed: {type(e).__name__}: {e}")
        self.post_message(reply)

    def on_reply(self, reply: Reply) -> None:
        reply.stop()
        if self._wanted_replies.get(reply.tag) != reply.generation:
            return  # overtaken by a newer request
        if getattr(self.app, "offline", None):
            return  # offline the page stays as it was; reconnecting asks again
        try:
            if reply.error is not None:
                self.failed(reply.tag, reply.error)
            else:
                self.answered(reply.tag, reply.result)
        except Exception as e:
            self.app.internal_errors.append(f"{type(self).__name__}: {type(e).__name__}: {e}")
            self.app.notify(f"internal error: {type(e).__name__}: {e}", severity="error", timeout=8)


class AgentPane(Asks, Widget):
    """A widget whose content comes from the agent."""


def prefetch_all(data: Any, asked: list[tuple[str, dict[str, Any]]]) -> None:
    """Warm ``data``'s cache with ``asked``, in order (run in a worker thread); stops when a
    newer prefetch replaces this one (the cursor moved). Sent in the background: a guess
    never delays what a key asks."""
    worker = get_current_worker()
    for method, params in asked:
        if worker.is_cancelled:
            return
        data.prefetch_later(method, **params)
