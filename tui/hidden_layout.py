"""A hidden widget laid out and drawn at the size it will be shown at, while nobody waits.

Explore builds its panes ahead hidden (``build_ahead``), and a hidden widget is never laid
out: the key that first showed one arranged its children, gave each its size (a line
table then built every row in view again, at its width) and drew every line of it. `a`
(the samples pane) was 54–73 ms, ≈ 25 ms more than the same key once the pane had been
shown. Here the pane is arranged on a layout of its own, at the size of the slot it will
be shown in, its widgets take their sizes, and it is drawn there, which fills their line
caches. A widget reads its region (its ``size``, what it draws at) from its screen's
layout, so meanwhile the screen's layout answers for the pane's widgets from this one.
The screen's own layout is untouched; shown later at that size, nothing of the pane
changes size, and what has not changed since is not drawn again. (Its widgets' Resize
handlers run when it is shown, as for any widget shown: run here, they would read the
screen's layout, where a hidden widget has no size.)
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from textual._compositor import Compositor, MapGeometry  # Textual's (private)
from textual.geometry import Size
from textual.widget import Widget


def draw_hidden(widget: Widget, size: Size) -> None:
    """Lay ``widget`` (hidden) out at ``size`` and draw it there, drawing nothing on
    screen: its widgets keep their sizes and what they drew."""
    layout = Compositor()
    with _found_in(widget.screen._compositor, layout):
        # Twice: a scrolling widget decides its scroll bars as it takes its size, and the
        # second arrangement places them (as a screen's next layout would).
        for _ in range(2):
            layout.reflow(widget, size)
            for each, geometry in layout.layers:
                each._size_updated(
                    geometry.region.size, geometry.virtual_size, geometry.container_size
                )
        layout.render_update(full=True)


@contextmanager
def _found_in(screen_layout: Compositor, layout: Compositor) -> Iterator[None]:
    """The screen's layout finds the widgets ``layout`` placed where it placed them."""
    find_on_screen = screen_layout.find_widget

    def find_widget(widget: Widget) -> MapGeometry:
        geometry = layout._full_map.get(widget)
        return find_on_screen(widget) if geometry is None else geometry

    screen_layout.find_widget = find_widget  # type: ignore[method-assign]
    try:
        yield
    finally:
        del screen_layout.find_widget
