"""Containers whose focus restyles themselves, not every widget under them.

Textual restyles a widget and all its descendants when the widget gains or loses focus, in
case a rule styles a descendant by an ancestor's ``:focus`` or ``:blur`` (``Tree:focus >
.tree--cursor``). For a container that takes the focus, that was every widget inside it
on every key that moved the focus in or out: the inspector's 27 (13–18 ms of `i`, and of
`a`, `s`, `p`… from it), the Loss page's detail column's 43 (≈ 24 ms of each Tab there).
When no rule of the stylesheet puts ``:focus`` or ``:blur`` on a selector the container
matches, save in the last place (its own rules), the restyle of what is under it changes
nothing, and the container alone is restyled. The check reads the stylesheet as it is at
the focus change, so a rule added later (a theme, a widget's CSS) is honoured.
"""

from __future__ import annotations

from textual.containers import VerticalScroll
from textual.widget import Widget

FOCUS_CLASSES = frozenset({"focus", "blur"})


def focus_styles_descendants(widget: Widget) -> bool:
    """Whether a rule of the app's stylesheet styles something under ``widget`` by
    ``widget``'s focus: a selector it matches, with ``:focus`` or ``:blur``, followed by
    another."""
    for rule in widget.app.stylesheet.rules:
        for selector_set in rule.selector_set:
            for selector in selector_set.selectors[:-1]:
                # `_check` (Textual's) matches the type, class and id, not pseudo-classes.
                if selector.pseudo_classes & FOCUS_CLASSES and selector._check(widget):
                    return True
    return False


class FocusStylesSelf:
    """Mixin, before the container class: a focus change restyles the container alone when
    no rule lets its focus style its descendants. (Not a ``Widget`` subclass: Textual would
    reset ``can_focus`` for it.)"""

    def watch_has_focus(self, has_focus: bool) -> None:
        assert isinstance(self, Widget)
        if focus_styles_descendants(self):
            self.update_node_styles()  # Textual's own: the widget and all under it
        else:
            self.app.stylesheet.update_nodes([self], animate=True)


class FocusVerticalScroll(FocusStylesSelf, VerticalScroll):
    """A ``VerticalScroll`` whose focus restyles it alone."""
