"""Every key binding of the viewer leads to an action of the class that declares it: a
binding whose action is missing falls through to the app's key of the same name (``g`` in a
list once toggled value/gradient instead of going to the first row)."""

from __future__ import annotations

from textual.binding import Binding
from viewer_support import classes_with_bindings


def _action_name(action: str) -> tuple[str | None, str]:
    """(namespace, name) of ``app.quit`` / ``page(1)`` / ``view('attention')``."""
    namespace, _, name = (
        action.rpartition(".") if "(" not in action.split(".")[0] else ("", "", action)
    )
    return namespace or None, name.split("(", 1)[0]


def test_every_bound_action_exists_on_the_class_that_binds_it():
    classes = classes_with_bindings()
    assert len(classes) >= 15  # the pages, the app, the lists, the panes
    missing = []
    for cls in classes:
        for binding in cls.BINDINGS:
            if not isinstance(binding, Binding):
                continue
            namespace, name = _action_name(binding.action)
            if namespace is not None:
                continue  # app.* / screen.*: checked on the app and screens themselves
            if not callable(getattr(cls, f"action_{name}", None)):
                missing.append(f"{cls.__qualname__}: {binding.key} → {binding.action}")
    assert missing == []
