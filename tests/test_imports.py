"""The rooms' import rules, read from the source: the viewer and the agent never import torch
or the recorder, and the agent never imports textual (see DESIGN.md, "Three processes")."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

FORBIDDEN = {
    "tui": ("torch", "tvis.record"),
    "agent": ("torch", "tvis.record", "textual"),
}


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """Every module ``path`` imports, anywhere in the file (lazy imports included)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
            found += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names]
    return found


def breaks(module: str, forbidden: tuple[str, ...]) -> bool:
    return any(module == f or module.startswith(f + ".") for f in forbidden)


@pytest.mark.parametrize("room", sorted(FORBIDDEN))
def test_room_imports_nothing_it_must_not(room: str):
    offences = [
        f"{path.relative_to(ROOT)}:{line} imports {module}"
        for path in sorted((ROOT / room).rglob("*.py"))
        for line, module in imported_modules(path)
        if breaks(module, FORBIDDEN[room])
    ]
    assert offences == []


def test_the_walker_sees_a_lazy_import(tmp_path: Path):
    source = tmp_path / "lazy.py"
    source.write_text("def f():\n    from tvis.record import builder\n    import torch.nn\n")
    modules = [m for _, m in imported_modules(source)]
    assert breaks(modules[0], FORBIDDEN["tui"]) and "torch.nn" in modules
