"""tvis under ``torch.compile``: Dynamo must not trace tvis's own hooks.

Dynamo inlines the global module hooks, loss wrappers and torch-function modes it meets
while tracing a compiled function. Traced, tvis's bookkeeping (its counters, its batch and
stack objects) became guards that changed at every call and recompiled the function until
Dynamo's recompile limit. Every entry point of tvis therefore returns at once while Dynamo
is tracing (``compiling()`` is a constant there, so it leaves nothing in the graph and no
guard): a compiled region is recorded as one opaque call at its boundary, its graph is
exactly the one a plain run compiles, and results stay bit-identical. Graph breaks
(``torch.compiler.disable`` on each hook) would split the graph at every module instead
and change the compiled code.
"""

from __future__ import annotations

import sys
import types
import warnings
from collections.abc import Callable, Iterator

from torch.compiler import is_compiling as compiling

__all__ = ["compiling", "quiet_hooks_warning"]

# What torch says at each call of a ``torch.compile(module)`` wrapper while any global
# module hook exists. Under tvis those hooks are tvis's own (a plain run has none and says
# nothing), and tvis expects the wrapper's extra hook call: the warning is not the script's.
_HOOKS_WARNING = r"Using `torch\.compile\(module\)` when there are global hooks"


def quiet_hooks_warning() -> Callable[[], None]:
    """Silence torch's warning about tvis's global hooks; returns what undoes it."""
    warnings.filterwarnings("ignore", message=_HOOKS_WARNING, category=UserWarning)
    added = warnings.filters[0]

    def restore() -> None:
        for i, entry in enumerate(warnings.filters):
            if entry is added:
                del warnings.filters[i]
                # Let go of decisions cached under the filter, as resetwarnings does
                # (where this Python has the hook; a stale cache only keeps it quiet).
                mutated = getattr(warnings, "_filters_mutated", None)
                if mutated is not None:
                    mutated()
                return

    return restore


def never_compiled(package: str = "tvis") -> None:
    """Mark every function of ``package`` as code Dynamo runs as it is.

    While a ``torch.compile``'d function runs, Dynamo's frame callback is on, and every
    Python frame that starts is handed to it to compile, tvis's trace callbacks and all
    they call included: each became graphs, graph breaks and recompiles of their own (27
    graphs where a plain run compiles 1). Marked, they run as written; a marked function
    Dynamo meets while tracing is still inlined (where ``compiling()`` makes it return)."""
    try:
        from torch._C._dynamo.eval_frame import (
            _FrameAction,
            _FrameExecStrategy,
            set_code_exec_strategy,
        )
    except ImportError:  # a torch without Dynamo
        return
    as_is = _FrameExecStrategy(_FrameAction.SKIP, _FrameAction.DEFAULT)
    for code in _codes(package):
        set_code_exec_strategy(code, as_is)


def _codes(package: str) -> Iterator[types.CodeType]:
    """The code objects of the loaded modules of ``package``, nested ones included."""
    seen: set[int] = set()
    found: list[types.CodeType] = []
    for name, module in list(sys.modules.items()):
        if module is None or not (name == package or name.startswith(package + ".")):
            continue
        for value in vars(module).values():
            members = vars(value).values() if isinstance(value, type) else (value,)
            for member in members:
                for fn in _functions(member):
                    if fn.__module__ == name:
                        found.append(fn.__code__)
    while found:
        code = found.pop()
        if id(code) in seen:
            continue
        seen.add(id(code))
        yield code
        found.extend(c for c in code.co_consts if isinstance(c, types.CodeType))


def _functions(member: object) -> list[types.FunctionType]:
    """The plain functions behind a class member (methods, properties, static methods)."""
    if isinstance(member, property):
        candidates = (member.fget, member.fset, member.fdel)
    elif isinstance(member, (staticmethod, classmethod)):
        candidates = (member.__func__,)
    else:
        candidates = (member,)
    return [fn for fn in candidates if isinstance(fn, types.FunctionType)]
