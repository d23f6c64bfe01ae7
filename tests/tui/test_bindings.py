"""Every key binding of the viewer leads to an action of the class that declares it: a
binding whose action is missing falls through to the app's key of the same name (``g`` in a
list once toggled value/gradient instead of going to the first row)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

from textual.binding import Binding
from textual.dom import DOMNode

import tvis.tui


def _classes_with_bindings() -> list[type]:
    found = {}
    for module in pkgutil.walk_packages(tvis.tui.__path__, "tvis.tui."):
        loaded = importlib.import_module(module.name)
        for _, cls in inspect.getmembers(loaded, inspect.isclass):
            if issubclass(cls, DOMNode) and cls.__module__.startswith("tvis.tui"):
                if any(
                    "BINDINGS" in vars(c) for c in cls.__mro__ if c.__module__.startswith("tvis")
                ):
                    found[f"{cls.__module__}.{cls.__qualname__}"] = cls
    return list(found.values())


def _action_name(action: str) -> tuple[str | None, str]:
    """(namespace, name) of ``app.quit`` / ``page(1)`` / ``view('attention')``."""
    namespace, _, name = (
        action.rpartition(".") if "(" not in action.split(".")[0] else ("", "", action)
    )
    return namespace or None, name.split("(", 1)[0]


def test_every_bound_action_exists_on_the_class_that_binds_it():
    classes = _classes_with_bindings()
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
