"""What the inspector asks the agent for to show a call: its record, then its cards'
pictures and its layer view. One place, so that what is fetched ahead — the rows beside
the cursor (``Inspector.prefetcher``), the first screen's call with the run
(``TvisApp._prefetch_first_screen``) — is exactly what the inspector then asks, and is
found in the client's cache.

Imports only what the first page has loaded already: the app's prefetch thread runs it
while that page is being built.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tvis.tui.messages import Selection
from tvis.tui.widgets.layer_views import Layer
from tvis.tui.widgets.tensor_card import CARD_ROWS, TensorRef, first_view_request

Request = tuple[str, dict[str, Any]]


def call_request(run: str | None, selection: Selection) -> dict[str, Any]:
    return {"run": run, "batch": selection.batch, "call": selection.call}


def call_args(call: dict[str, Any]) -> list[tuple[str, list]]:
    """A call's outputs, then its inputs: the inspector's sections, in order."""
    sides = (("outputs", call.get("outputs") or []), ("inputs", call.get("inputs") or []))
    return [(side, args) for side, args in sides if args]


def layer_of(
    call: dict[str, Any], selection: Selection, run: str, sample: int, grad: bool
) -> Layer | None:
    """The layer views' subject: a model call's first output, when it has one."""
    if call.get("kind") not in ("module", "function") or call.get("phase") != "forward":
        return None
    entry = next(
        (a["entry"] for a in call.get("outputs") or [] if isinstance(a, dict) and a.get("entry")),
        None,
    )
    if entry is None or selection.batch is None or selection.call is None:
        return None
    return Layer(
        run=run,
        batch=selection.batch,
        call=selection.call,
        sample=sample,
        grad=grad,
        tensor=entry.get("id"),
        name=str(call.get("name") or ""),
    )


def picture_requests(
    call: dict[str, Any],
    selection: Selection,
    run: str | None,
    sample: int,
    grad: bool,
    width: int | None,
    layer_request: Callable[[Layer], Request | None] | None,
) -> list[Request]:
    """What showing ``call`` (its record, as the agent answered it) asks for next: each card's
    picture at ``width`` columns (None: no cards drawn), then the view of its layer
    (``layer_request``: the layer views' request; None when they are not shown)."""
    requests: list[Request] = []
    if width is not None:
        for _, args in call_args(call):
            for arg in args:
                entry = arg.get("entry") if isinstance(arg, dict) else None
                if entry is None:
                    continue
                ref = TensorRef(title="", entry=entry, run=run or "", batch=selection.batch)
                request = first_view_request(ref, grad, sample, width, CARD_ROWS)
                if request is not None:
                    requests.append(request)
    layer = layer_of(call, selection, run or "", sample, grad)
    if layer is not None and layer_request is not None:
        request = layer_request(layer)
        if request is not None:
            requests.append(request)
    return requests
