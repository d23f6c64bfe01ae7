"""Which code is the user's project (traced) and which is library or tvis (not traced)."""

from __future__ import annotations

import os
from pathlib import Path
from types import CodeType

import tvis

_TVIS_DIRS = tuple(
    os.path.realpath(p) + os.sep
    for p in {
        Path(tvis.__file__).parent,
        Path(tvis.__file__).parent.parent / "agent",
        Path(tvis.__file__).parent.parent / "tui",
    }
)
_GENERATOR_FLAGS = (
    0x20 | 0x80 | 0x100 | 0x200
)  # generator, coroutine, iterable coroutine, async gen


# Protocol methods a sampler or a print calls many times a batch and that compute nothing
# a person debugs; traced they would bury the data phase.
_UNTRACED = {"__len__", "__repr__", "__str__", "__hash__", "__eq__", "__bool__", "__getattr__"}


class Project:
    """The project folder: decides, once per code object, whether a function is traced."""

    def __init__(self, root: Path) -> None:
        self.root = os.path.realpath(root) + os.sep
        self._code: dict[CodeType, bool] = {}
        self._files: dict[str, str | None] = {}
        self.sources: dict[str, str] = {}

    def relpath(self, filename: str) -> str | None:
        """The project-relative path of ``filename``, or None if it is not project code."""
        known = self._files.get(filename, ...)
        if known is not ...:
            return known
        real = os.path.realpath(filename) if filename and not filename.startswith("<") else ""
        inside = (
            real.startswith(self.root)
            and not real.startswith(_TVIS_DIRS)
            and f"{os.sep}site-packages{os.sep}" not in real
        )
        rel = os.path.relpath(real, self.root) if inside else None
        self._files[filename] = rel
        if rel is not None and rel not in self.sources:
            self._snapshot(real, rel)
        return rel

    def is_traced(self, code: CodeType) -> bool:
        """True for plain functions defined in project files (not generators, not lambdas
        or comprehensions, whose calls would drown the tree)."""
        traced = self._code.get(code)
        if traced is None:
            traced = (
                not code.co_flags & _GENERATOR_FLAGS
                and not code.co_name.startswith("<")
                and code.co_name not in _UNTRACED
                and self.relpath(code.co_filename) is not None
            )
            self._code[code] = traced
        return traced

    def is_project_class(self, cls: type) -> bool:
        forward = getattr(cls, "forward", None)
        code = getattr(forward, "__code__", None)
        return code is not None and self.relpath(code.co_filename) is not None

    def where(self, filename: str, line: int) -> list:
        """A [file, line] location, project-relative when possible."""
        return [self.relpath(filename) or filename, line]

    def _snapshot(self, real: str, rel: str) -> None:
        try:
            with open(real, encoding="utf-8", errors="replace") as f:
                self.sources[rel] = f.read()
        except OSError:
            pass
