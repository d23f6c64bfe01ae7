"""Attribute patches that are always undone: the few places torch offers no hook."""

from __future__ import annotations

from typing import Any


class Patches:
    """Sets attributes and remembers the originals so ``restore`` puts every one back."""

    def __init__(self) -> None:
        self._saved: list[tuple[Any, str, Any]] = []

    def set(self, owner: Any, name: str, value: Any) -> None:
        self._saved.append((owner, name, owner.__dict__.get(name, getattr(owner, name))))
        setattr(owner, name, value)

    def restore(self) -> None:
        while self._saved:
            owner, name, original = self._saved.pop()
            setattr(owner, name, original)
