"""Widgets that a resize repaints once, not twice.

After a layout resizes a widget, Textual sets the widget's virtual size, a reactive that
asks for another layout and a repaint. Neither is needed: the layout that resized the widget
has placed and drawn it. The repaint sent the same cells again (half of what a tree move
wrote to the terminal); the second layout doubled the cost of a tree move whose pictures
change height, and left the screen as it was (tests/tui/test_inspector.py). Containers,
scrolling ones included, and widgets that draw their own fixed-size content; not a line-API
scroll view, whose lines depend on it.
"""

from __future__ import annotations

from textual.containers import Vertical
from textual.geometry import Size
from textual.reactive import Reactive
from textual.widgets import Static


class Steady:
    """Mixin, before the widget class: a change of virtual size neither lays out nor repaints."""

    virtual_size = Reactive(Size(0, 0), layout=False, repaint=False)


class SteadyStatic(Steady, Static):
    """A ``Static`` inside the inspector, a card or a picture."""


class SteadyVertical(Steady, Vertical):
    """A ``Vertical`` of such widgets."""
