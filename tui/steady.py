"""``Steady``: widgets laid out once per change, not twice.

After a layout that resized a widget, Textual sets the widget's ``virtual_size``, a
reactive that asks for another layout; so every layout that resizes something is followed
by a second one, which repaints the resized widgets with the cells the first had just
drawn. A tree move resizes the inspector's cards, and that second pass sent the whole
inspector to the terminal again: 23 of the 50 KiB a move wrote (bench/README.md).

The first layout has already placed, sized and painted such a widget and updated its
scrollbars, and a widget whose own content changes size asks for a layout itself; so
here the virtual size is a plain value. Textual is pinned (pyproject.toml), and
``tests/tui/test_inspector.py`` counts the layouts of a move.
"""

from __future__ import annotations

from textual.geometry import Size
from textual.reactive import Reactive
from textual.widgets import Static


class Steady:
    """Mixed in before the widget class."""

    virtual_size = Reactive(Size(0, 0), layout=False, repaint=False)


class SteadyStatic(Steady, Static):
    """A ``Static`` inside a steady widget."""
