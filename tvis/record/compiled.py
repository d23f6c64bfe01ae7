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

import warnings
from collections.abc import Callable

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
