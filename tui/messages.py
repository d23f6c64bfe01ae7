"""Messages that panes post so the page can keep every pane on the same call and sample."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from textual.message import Message


@dataclass(frozen=True)
class Selection:
    """What the inspector shows: a call of a batch, a batch itself, or a parameter of a step."""

    kind: str  # "call" | "batch" | "param"
    batch: int | None = None
    call: int | None = None
    step: int | None = None
    param: dict[str, Any] | None = None
    row: dict[str, Any] | None = None

    def key(self) -> tuple:
        name = self.param.get("name") if self.param else None
        return (self.kind, self.batch, self.call, self.step, name)


class Selected(Message):
    """The cursor moved onto something the inspector can show; ``open_inspector`` when the
    user pressed enter on it (compact layouts then bring the inspector forward)."""

    def __init__(self, selection: Selection, open_inspector: bool = False) -> None:
        super().__init__()
        self.selection = selection
        self.open_inspector = open_inspector


class GotoCall(Message):
    """Another pane (source, layers, timeline, search) asks for a call to be selected."""

    def __init__(self, call: int, batch: int | None = None, path: list[int] | None = None) -> None:
        super().__init__()
        self.call = call
        self.batch = batch
        self.path = path


class GotoSource(Message):
    """Show a file in the Source pane with ``line`` under the cursor."""

    def __init__(self, file: str, line: int | None) -> None:
        super().__init__()
        self.file = file
        self.line = line
