"""Widgets that a resize repaints once, not twice.

After a layout resizes a widget, Textual sets the widget's virtual size, a reactive that
asks for another layout and a repaint. That layout is kept (it corrects the heights that
nested auto-height containers cached), but the repaint is not: the layout that resized the
widget has already drawn it, so the repaint sent the same cells again — half of what a tree
move wrote to the terminal. Containers, scrolling ones included, and widgets that draw
their own fixed-size content; not a line-API scroll view, whose lines depend on it.
"""

from __future__ import annotations

from textual.containers import Vertical
from textual.geometry import Size
from textual.reactive import Reactive
from textual.widgets import Static


class Steady:
    """Mixin, before the widget class: a change of virtual size lays out, never repaints."""

    virtual_size = Reactive(Size(0, 0), layout=True, repaint=False)


class SteadyStatic(Steady, Static):
    """A ``Static`` inside the inspector, a card or a picture."""


class SteadyVertical(Steady, Vertical):
    """A ``Vertical`` of such widgets."""
