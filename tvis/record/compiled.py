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

from torch.compiler import is_compiling as compiling

__all__ = ["compiling"]
