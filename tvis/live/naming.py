"""Names for catches made without one: the argument's source text, made a valid identifier.

``tvis.catch(model.lm_head.weight)`` is named ``model_lm_head_weight`` so that ``ingest_all`` can
bind it. The name is read from the calling frame at the call itself (a sender thread would see a
frame that has moved on) and cached per call site, so only the first call at a site parses source.
"""

from __future__ import annotations

import ast
import keyword
import linecache
import re
from types import CodeType, FrameType

FALLBACK = "value"
"""The name when there is no source to read (an interactive prompt, ``python -c``)."""

# Keyed by the code object's id, not the object: hashing a code object hashes its bytecode and
# constants on every call. The entry keeps the code alive, so its id cannot be reused.
_cache: dict[tuple[int, int], tuple[CodeType, str]] = {}


def infer_name(frame: FrameType) -> str:
    """The identifier for the catch being called from ``frame``."""
    code = frame.f_code
    key = (id(code), frame.f_lasti)
    cached = _cache.get(key)
    if cached is None or cached[0] is not code:
        cached = _cache[key] = (code, _name_at(code, frame.f_lasti, frame.f_lineno))
    return cached[1]


def identifier(text: str) -> str:
    """``text`` made a valid, non-keyword Python identifier (``x[0].grad`` -> ``x_0_grad``)."""
    name = re.sub(r"\W+", "_", text).strip("_") or FALLBACK
    if name[0].isdigit() or keyword.iskeyword(name):
        name = f"_{name}"
    return name


def _name_at(code: CodeType, lasti: int, lineno: int | None) -> str:
    call = _call_source(code, lasti)
    if call is not None:
        arg = _first_argument(call, exact=True)
    else:
        line = _line_source(code, lineno)
        arg = _first_argument(line, exact=False) if line else None
    return identifier(ast.unparse(arg)) if arg is not None else FALLBACK


def _call_source(code: CodeType, lasti: int) -> str | None:
    """The exact source of the call expression executing at ``lasti`` (Python 3.11+)."""
    positions = getattr(code, "co_positions", None)
    if positions is None or lasti < 0:
        return None
    try:
        start, end, col, end_col = list(positions())[lasti // 2]
    except IndexError:
        return None
    if None in (start, end, col, end_col):
        return None
    lines = [linecache.getline(code.co_filename, n).encode() for n in range(start, end + 1)]
    if not lines[-1]:
        return None
    # Column offsets count UTF-8 bytes; slice the last line first in case start == end.
    lines[-1] = lines[-1][:end_col]
    lines[0] = lines[0][col:]
    return b"".join(lines).decode(errors="replace")


def _line_source(code: CodeType, lineno: int | None) -> str | None:
    """The whole source line, for interpreters without column positions."""
    line = linecache.getline(code.co_filename, lineno or 0).strip()
    return line or None


def _first_argument(source: str, exact: bool) -> ast.expr | None:
    """The object argument of the call ``source`` is (``exact``), or of its first ``catch(...)``."""
    try:
        tree = ast.parse(f"(\n{source}\n)", mode="eval")
    except SyntaxError:
        try:
            tree = ast.parse(source)
        except SyntaxError:
            return None
    # An exact call expression is the call itself, whatever catch was imported as.
    exact = exact and isinstance(tree, ast.Expression) and isinstance(tree.body, ast.Call)
    calls = [tree.body] if exact else ast.walk(tree)
    for node in calls:
        if isinstance(node, ast.Call) and (exact or _callee_name(node.func) == "catch"):
            if node.args:
                return node.args[0]
            return next((k.value for k in node.keywords if k.arg == "obj"), None)
    return None


def _callee_name(func: ast.expr) -> str | None:
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return None
