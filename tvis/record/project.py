"""Which code is the user's project (traced) and which is library or tvis (not traced).

By default the project is the code the user wrote: the script's git work tree (else its
folder) and every other imported file outside the installed libraries and the standard
library (a package of theirs on ``PYTHONPATH`` or installed editable lives in their own
folder). ``--project DIR`` narrows it to that folder alone.
"""

from __future__ import annotations

import os
import sys
import sysconfig
from pathlib import Path
from types import CodeType, FrameType

import torch

import tvis

_TVIS_DIRS = tuple(
    os.path.realpath(p) + os.sep
    for p in {
        Path(tvis.__file__).parent,
        Path(tvis.__file__).parent.parent / "agent",
        Path(tvis.__file__).parent.parent / "tui",
    }
)
# Python's own files: the standard library, and the interpreter's and the environment's
# prefixes (a venv inside the repository, the console script that started tvis).
_PYTHON_DIRS = tuple(
    os.path.realpath(p) + os.sep
    for p in {
        *(sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib")),
        sys.prefix,
        sys.base_prefix,
        sys.exec_prefix,
        os.path.dirname(torch.__file__),  # torch itself, even as a source checkout
    }
)
_INSTALLED = (f"{os.sep}site-packages{os.sep}", f"{os.sep}dist-packages{os.sep}")
# Code torch.compile writes and runs every step (inductor's and triton's caches, by default
# under the temp folder as torchinductor_<user>): generated, never the user's.
_GENERATED = (
    "torchinductor_",
    f"{os.sep}.triton{os.sep}",
    *(
        os.path.realpath(os.environ[v]) + os.sep
        for v in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")
        if os.environ.get(v)
    ),
)
_GENERATOR_FLAGS = (
    0x20 | 0x80 | 0x100 | 0x200
)  # generator, coroutine, iterable coroutine, async gen


# Protocol methods a sampler or a print calls many times a batch and that compute nothing
# a person debugs; traced they would bury the data phase.
_UNTRACED = {"__len__", "__repr__", "__str__", "__hash__", "__eq__", "__bool__", "__getattr__"}


class Project:
    """The project: decides, once per code object, whether a function is traced. Files
    under ``root`` are named relative to it; with ``wide``, any other file that is not
    library code belongs too, named by its absolute path."""

    def __init__(self, root: Path, wide: bool = False) -> None:
        self.root = os.path.realpath(root) + os.sep
        self.wide = wide
        self._code: dict[CodeType, bool] = {}
        self._files: dict[str, str | None] = {}
        self.sources: dict[str, str] = {}

    def relpath(self, filename: str) -> str | None:
        """The project-relative path of ``filename``, or None if it is not project code."""
        known = self._files.get(filename, ...)
        if known is not ...:
            return known
        real = os.path.realpath(filename) if filename and not filename.startswith("<") else ""
        if not real or _is_library(real):
            rel = None
        elif real.startswith(self.root):
            rel = os.path.relpath(real, self.root)
        else:
            rel = real if self.wide and os.path.isfile(real) else None
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

    def caller(self, frame: FrameType) -> list | None:
        """Where the function running in ``frame`` was called from: the first frame outside
        tvis's own code (the recorder's fetch loop calls the user's dataset for torch's)."""
        back = frame.f_back
        while back is not None and back.f_code.co_filename.startswith(_TVIS_DIRS):
            back = back.f_back
        return self.where(back.f_code.co_filename, back.f_lineno) if back else None

    def _snapshot(self, real: str, rel: str) -> None:
        try:
            with open(real, encoding="utf-8", errors="replace") as f:
                self.sources[rel] = f.read()
        except OSError:
            pass


def _is_library(real: str) -> bool:
    """Installed packages, Python's own files, generated code and tvis: never the user's."""
    return (
        real.startswith(_TVIS_DIRS)
        or real.startswith(_PYTHON_DIRS)
        or any(part in real for part in (*_INSTALLED, *_GENERATED))
    )


def default_root(script: Path) -> Path:
    """The script's git work tree (the nearest folder above it holding ``.git``, a folder
    or a worktree's file), else the script's own folder."""
    folder = script.resolve().parent
    for candidate in (folder, *folder.parents):
        if (candidate / ".git").exists():
            return candidate
    return folder
