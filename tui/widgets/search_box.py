"""``SearchBox``: a text box that is shown only while searching.

A hidden ``Input`` must never hold the focus: Textual's auto-focus (a screen resumed with
nothing focused) and ``tab`` would hand it every key, ``q`` and the page numbers included,
with nothing on screen saying where they went.
"""

from __future__ import annotations

from textual.widget import Widget
from textual.widgets import Input


class SearchBox(Input):
    """An ``Input`` that takes the focus only while it and everything around it is shown."""

    def allow_focus(self) -> bool:
        shown = all(node.display for node in self.ancestors_with_self if isinstance(node, Widget))
        return shown and super().allow_focus()
